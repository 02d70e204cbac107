package timeid

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/idmint/idmint/gene"
)

// GeneSettings configures a Gene generator. The body is split, from the
// top, into WorkerBits + SeqBits + GeneBits = 22.
type GeneSettings struct {
	Settings
	// Key is the 16-byte secret gene key (see package gene).
	Key []byte
	// GeneBits is k, the gene width: 2^k shards. Zero means 8.
	GeneBits int
	// WorkerBits is the width of the worker field. Zero means 4 (16
	// generators); use -1 for none (one generator only).
	WorkerBits int
}

// Gene issues timestamp + worker + sequence + gene IDs:
//
//	+---+----------------+--------+----------+-----------+
//	| 0 | ms since Epoch | worker | sequence | gene (k)  |
//	|   | 41 bits        | W bits | S bits   | k bits    |
//	+---+----------------+--------+----------+-----------+
//
// Defaults: W = 4, k = 8, S = 10 (1,024 IDs per millisecond per worker).
// Unique across generators with distinct workers; strictly increasing per
// generator while the wall clock does not step back (after a step back the
// last millisecond is held). ID & (2^k - 1) equals gene.Of(member) under the
// key, so a member's IDs and the member's own rows route to one shard; the
// gene is a keyed PRF output, so it reveals nothing about the member
// without the key beyond which shard they are on. Safe for concurrent use.
type Gene struct {
	c        *core
	h        *gene.Hasher
	worker   uint64
	seqBits  int
	geneBits int
	seq      uint64 // next sequence in the current millisecond
}

// NewGene returns a Gene generator for worker, which must fit WorkerBits.
func NewGene(worker uint64, s GeneSettings) (*Gene, error) {
	if s.GeneBits == 0 {
		s.GeneBits = 8
	}
	switch {
	case s.WorkerBits == 0:
		s.WorkerBits = 4
	case s.WorkerBits == -1:
		s.WorkerBits = 0
	}
	if s.GeneBits < 1 || s.WorkerBits < 0 || s.GeneBits+s.WorkerBits > BodyBits-1 {
		return nil, fmt.Errorf("%w: GeneBits = %d, WorkerBits = %d: want GeneBits >= 1 and GeneBits + WorkerBits <= %d", ErrSettings, s.GeneBits, s.WorkerBits, BodyBits-1)
	}
	if worker >= 1<<s.WorkerBits {
		return nil, fmt.Errorf("%w: worker %d does not fit WorkerBits = %d", ErrSettings, worker, s.WorkerBits)
	}
	h, err := gene.New(s.Key, s.GeneBits)
	if err != nil {
		return nil, fmt.Errorf("%w: Key: %v", ErrSettings, err)
	}
	c, err := newCore(s.Settings)
	if err != nil {
		return nil, err
	}
	return &Gene{c: c, h: h, worker: worker, geneBits: s.GeneBits, seqBits: BodyBits - s.GeneBits - s.WorkerBits}, nil
}

// Next returns an ID for a member given as bytes. It fails with ErrTime,
// ErrExhausted (more than 2^S IDs in a millisecond and the next further
// than MaxWait) or ctx's error while waiting.
func (g *Gene) Next(ctx context.Context, member []byte) (int64, error) {
	gn := g.h.Of(member)
	return g.c.next(ctx, func(fresh bool) (uint64, bool, error) {
		if fresh {
			g.seq = 0
		}
		if g.seq >= 1<<g.seqBits {
			return 0, false, nil
		}
		body := (g.worker<<g.seqBits|g.seq)<<g.geneBits | gn
		g.seq++
		return body, true, nil
	})
}

// NextUint64 is Next for a numeric member ID, hashed as 8 big-endian bytes
// (the same gene as gene.Hasher.OfUint64).
func (g *Gene) NextUint64(ctx context.Context, member uint64) (int64, error) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], member)
	return g.Next(ctx, b[:])
}

// Shard returns the gene of an ID: the shard it belongs on.
func (g *Gene) Shard(id int64) uint64 { return uint64(id) & (1<<g.geneBits - 1) }

// ShardOf returns the shard of a member: equal to Shard of each of its IDs.
func (g *Gene) ShardOf(member []byte) uint64 { return g.h.Of(member) }

// Decode splits an ID of this generator's layout.
func (g *Gene) Decode(id int64) (Parts, error) {
	t, body, err := g.c.decodeTime(id)
	return Parts{
		Time:   t,
		Gene:   body & (1<<g.geneBits - 1),
		Seq:    body >> g.geneBits & (1<<g.seqBits - 1),
		Worker: body >> (g.geneBits + g.seqBits),
	}, err
}

// Ahead reports how far the last millisecond is ahead of the clock.
func (g *Gene) Ahead() time.Duration { return g.c.ahead() }
