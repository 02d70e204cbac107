package regions

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/idmint/idmint/monotonic/lincheck"
	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/region"
	"github.com/idmint/idmint/snowflake"
)

// verdict is what the collected IDs say, per key.
type verdict struct {
	key        string
	ids        map[string]int // IDs per region
	duplicates int            // IDs answered more than once, over both regions
	dupExample string
	disorder   int // answers of one node not above its previous answer
	disExample string
	outside    int // IDs outside the answering region's share of the line
	outExample string
	realtime   []lincheck.Violation // real-time order within a region
	malformed  int
}

// check judges every answer the loaders kept.
func (l *load) check(sites map[string]region.Region) []verdict {
	var out []verdict
	for _, k := range keys {
		v := verdict{key: k.name, ids: map[string]int{}}
		var nums []int64
		var strs []string
		lin := map[string][]lincheck.Op{}
		for _, s := range l.streams {
			if s.key.name != k.name {
				continue
			}
			life := -1
			var lastNum int64
			var lastStr string
			for i, o := range s.ops {
				n := len(o.nums)
				if k.text {
					n = len(o.strs)
				} else if o.nums == nil {
					v.malformed++
					continue
				}
				v.ids[o.region] += n
				if o.life != life {
					life, lastNum, lastStr = o.life, math.MinInt64, ""
				}
				for j := range n {
					var id int64
					var str string
					if k.text {
						str = o.strs[j]
						strs = append(strs, str)
						if k.ordered && str <= lastStr {
							v.disorder++
							if v.disExample == "" {
								v.disExample = fmt.Sprintf("%s answer %d: %s after %s", s.slot.name, i, str, lastStr)
							}
						}
						lastStr = str
					} else {
						id = o.nums[j]
						nums = append(nums, id)
						if k.ordered && id <= lastNum {
							v.disorder++
							if v.disExample == "" {
								v.disExample = fmt.Sprintf("%s answer %d: %d after %d", s.slot.name, i, id, lastNum)
							}
						}
						lastNum = id
					}
					if k.share != nil {
						if why := k.share(sites[o.region], id, str); why != "" {
							v.outside++
							if v.outExample == "" {
								v.outExample = fmt.Sprintf("%s (region %s): %s", s.slot.name, o.region, why)
							}
						}
					}
				}
				if k.linear && !k.text {
					lin[o.region] = append(lin[o.region], lincheck.Op{Sent: o.sent, Received: o.recv, IDs: o.nums,
						Label: fmt.Sprintf("%s life %d", s.slot.name, o.life)})
				}
			}
		}
		if k.text {
			sort.Strings(strs)
			n, ex := duplicates(strs)
			v.duplicates, v.dupExample = n, strings.Join(ex, ", ")
		} else {
			sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
			n, ex := duplicates(nums)
			v.duplicates, v.dupExample = n, fmt.Sprint(ex)
		}
		regions := make([]string, 0, len(lin))
		for r := range lin {
			regions = append(regions, r)
		}
		sort.Strings(regions)
		for _, r := range regions {
			for _, x := range lincheck.Check(lin[r], 5) {
				if x.Kind != "duplicate" { // duplicates are counted over both regions above
					x.Msg = r + ": " + x.Msg
					v.realtime = append(v.realtime, x)
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// report logs the verdicts and fails the test on any duplicate, disorder,
// ID outside its region's share or real-time violation.
func report(t *testing.T, vs []verdict, regions []string) {
	t.Helper()
	for _, v := range vs {
		var per []string
		total := 0
		for _, r := range regions {
			per = append(per, fmt.Sprintf("%s %d", r, v.ids[r]))
			total += v.ids[r]
		}
		t.Logf("key %-7s %9d IDs (%s): %d duplicates, %d out of order, %d outside their region's share, %d real-time violations",
			v.key, total, strings.Join(per, ", "), v.duplicates, v.disorder, v.outside, len(v.realtime))
		if v.duplicates > 0 {
			t.Errorf("key %s: %d IDs answered more than once across the two regions, e.g. %s", v.key, v.duplicates, v.dupExample)
		}
		if v.disorder > 0 {
			t.Errorf("key %s: %d IDs not above the same node's previous one, e.g. %s", v.key, v.disorder, v.disExample)
		}
		if v.outside > 0 {
			t.Errorf("key %s: %d IDs outside the answering region's share, e.g. %s", v.key, v.outside, v.outExample)
		}
		for _, x := range v.realtime {
			t.Errorf("key %s: %s: %s", v.key, x.Kind, x.Msg)
		}
		if v.malformed > 0 {
			t.Errorf("key %s: %d answers held IDs that are not int64 numbers", v.key, v.malformed)
		}
		if total == 0 {
			t.Errorf("key %s: no IDs collected", v.key)
		}
	}
}

// lineShare: a counter key's ID lies in its region's share of the
// number line (region.Line).
func lineShare(r region.Region, id int64, _ string) string {
	ln := r.Line(math.MaxInt64)
	if id < ln.Base || id > ln.Base+ln.Limit {
		return fmt.Sprintf("%d is outside [%d, %d]", id, ln.Base, ln.Base+ln.Limit)
	}
	return ""
}

var leaf, twitter = mustLayout("leaf"), mustLayout("twitter")

func mustLayout(name string) snowflake.Layout {
	l, ok := snowflake.Lookup(name)
	if !ok {
		panic("no layout " + name)
	}
	return l
}

// workerShare: a leaf ID's worker lies in the region's slice of the
// 1,024 worker IDs (region i of n: [i*1024/n, (i+1)*1024/n)).
func workerShare(r region.Region, id int64, _ string) string {
	p, err := snowflake.Decode(leaf, id)
	if err != nil {
		return err.Error()
	}
	w := int64(1) << leaf.NodeFields()[0].Bits
	lo, hi := int64(r.Index)*w/int64(r.Count), int64(r.Index+1)*w/int64(r.Count)
	if p.Node["worker"] < lo || p.Node["worker"] >= hi {
		return fmt.Sprintf("%d has worker %d, outside [%d, %d)", id, p.Node["worker"], lo, hi)
	}
	return ""
}

// datacenterShare: a twitter ID's datacenter field holds the region
// index.
func datacenterShare(r region.Region, id int64, _ string) string {
	p, err := snowflake.Decode(twitter, id)
	if err != nil {
		return err.Error()
	}
	if p.Node["datacenter"] != int64(r.Index) {
		return fmt.Sprintf("%d has datacenter %d, not the region index %d", id, p.Node["datacenter"], r.Index)
	}
	return ""
}

var orderFormat = func() ordernum.Format {
	f, err := ordernum.ParseFormat("length=16")
	if err != nil {
		panic(err)
	}
	return f
}()

var orderCodec = func() *ordernum.Codec {
	f := orderFormat
	key, err := ordernum.ParseKey(0, orderKey)
	if err != nil {
		panic(err)
	}
	c, err := ordernum.New(f, key)
	if err != nil {
		panic(err)
	}
	return c
}()

// blockShare: an order number decrypts (with the key's own material) to
// a sequence value in the region's block of the permutation's input:
// value / (capacity/count) is the region index.
func blockShare(r region.Region, _ int64, s string) string {
	p, err := orderCodec.Decode(s)
	if err != nil {
		return err.Error()
	}
	share := orderFormat.Capacity() / uint64(r.Count)
	if p.Seq/share != uint64(r.Index) {
		return fmt.Sprintf("%s decrypts to %d, in block %d of %d (%d each), not the region index %d", s, p.Seq, p.Seq/share, r.Count, share, r.Index)
	}
	return ""
}
