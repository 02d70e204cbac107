// Package region describes how one key's ID space is shared among regions
// (datacenters) that share no store and no coordinator: each region owns a
// disjoint part of the space, fixed by its index, so two regions never issue
// the same ID while nothing on the hot path crosses between them.
//
// The zero Region (or one with Count 1) is the single-region deployment:
// every mapping here is then the identity, so a deployment that has never
// named a region issues exactly the IDs it issued before.
package region

import (
	"fmt"
	"math/bits"
	"regexp"
	"strconv"
)

// Region is this node's region: its name, its index and how many regions
// the ID space is split among.
type Region struct {
	// Name names the region ("eu-west"); recorded where the region runs
	// and checked at every start.
	Name string
	// Index is this region's place, 0 <= Index < Count.
	Index int
	// Count is the number of regions the ID space is split among. It is
	// fixed for the lifetime of the keys: a region's share depends on it.
	Count int
}

// MaxCount bounds Count: 1024 regions take 10 bits of a 63-bit counter.
const MaxCount = 1024

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Single reports whether the ID space is not split (no region configured,
// or a count of 1).
func (r Region) Single() bool { return r.Count <= 1 }

// Validate checks a configured region; field names are the config's.
func (r Region) Validate() error {
	if r.Count == 0 && r.Index == 0 && r.Name == "" {
		return nil
	}
	if !nameRE.MatchString(r.Name) {
		return fmt.Errorf("region.name: %q is not a region name (lower-case letters, digits and '-', at most 63, e.g. eu-west)", r.Name)
	}
	if r.Count < 1 || r.Count > MaxCount {
		return fmt.Errorf("region.count: %d is out of range (1..%d regions)", r.Count, MaxCount)
	}
	if r.Index < 0 || r.Index >= r.Count {
		return fmt.Errorf("region.index: %d is out of range (0..%d for region.count %d)", r.Index, r.Count-1, r.Count)
	}
	return nil
}

// Bits is how many bits the region index takes in a counter's number:
// ceil(log2(Count)), 0 for a single region.
func (r Region) Bits() uint {
	if r.Count <= 1 {
		return 0
	}
	return uint(bits.Len(uint(r.Count - 1)))
}

// String names the region as logs and errors do: "eu-west (index 1 of 2)".
func (r Region) String() string {
	if r.Name == "" {
		return "(no region)"
	}
	return fmt.Sprintf("%s (index %d of %d)", r.Name, r.Index, r.Count)
}

// Line is a region's share of a counter's number line [0, max]: the
// numbers whose top Bits (below max's highest bit) hold the region index.
// A counter n of the region's own store (0 <= n <= Limit) is issued as
// Base | n. Region 0's base is 0, so a single region that becomes region
// 0 of two keeps issuing the same numbers it did (no re-basing), as long
// as its counter is still below the new Limit.
type Line struct {
	Base  int64 // first number of the region's share
	Limit int64 // largest counter value the region may issue (inclusive)
}

// Line returns the region's share of [0, max], where max is 2^k-1 (2^63-1
// for int64 keys, 2^53-1 for JavaScript-safe keys).
func (r Region) Line(max int64) Line {
	b := r.Bits()
	if b == 0 {
		return Line{Base: 0, Limit: max}
	}
	k := uint(bits.Len64(uint64(max))) // max = 2^k - 1
	shift := k - b
	return Line{Base: int64(r.Index) << shift, Limit: int64(1)<<shift - 1}
}

// Issue maps counter value n of the region's store to the ID it issues.
// ok is false when n is outside the region's share (the counter ran out).
func (l Line) Issue(n int64) (id int64, ok bool) {
	if n < 0 || n > l.Limit {
		return 0, false
	}
	return l.Base | n, true
}

// The names of a region registry's records (the registry is any witness
// that keeps write-once records): the count every region agrees on, each
// index's holder, and each name's index. The server claims them at start;
// idmint doctor reads them.
const CountRecord = "region-count"

// IndexRecord names the record of index i's holder.
func IndexRecord(i int) string { return "region-index/" + strconv.Itoa(i) }

// NameRecord names the record of the region called name's index.
func NameRecord(name string) string { return "region-name/" + name }
