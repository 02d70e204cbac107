package region

import (
	"math"
	"testing"
)

func TestLineDisjoint(t *testing.T) {
	for _, count := range []int{2, 3, 4, 5, 1024} {
		var prevEnd int64 = -1
		for i := 0; i < count; i++ {
			l := Region{Name: "r", Index: i, Count: count}.Line(math.MaxInt64)
			if l.Base <= prevEnd {
				t.Fatalf("count %d: region %d starts at %d, inside region %d's share ending %d", count, i, l.Base, i-1, prevEnd)
			}
			end, ok := l.Issue(l.Limit)
			if !ok || end < l.Base {
				t.Fatalf("count %d: region %d's last number %d (ok %v) below its base %d", count, i, end, ok, l.Base)
			}
			if _, ok := l.Issue(l.Limit + 1); ok {
				t.Fatalf("count %d: region %d issued past its limit", count, i)
			}
			prevEnd = end
		}
	}
}

func TestSingleIsIdentity(t *testing.T) {
	for _, r := range []Region{{}, {Name: "solo", Index: 0, Count: 1}} {
		l := r.Line(math.MaxInt64)
		if id, ok := l.Issue(12345); !ok || id != 12345 {
			t.Fatalf("%v: 12345 issued as %d (ok %v)", r, id, ok)
		}
	}
	// Region 0 of two keeps a former single region's numbers.
	if id, _ := (Region{Name: "a", Index: 0, Count: 2}).Line(math.MaxInt64).Issue(77); id != 77 {
		t.Fatalf("region 0 of 2 issued 77 as %d", id)
	}
}

func TestJSSafeLine(t *testing.T) {
	l := Region{Name: "b", Index: 1, Count: 2}.Line(1<<53 - 1)
	if id, ok := l.Issue(l.Limit); !ok || id != 1<<53-1 {
		t.Fatalf("region 1 of 2's last JS-safe ID is %d (ok %v), want 2^53-1", id, ok)
	}
	if l.Base != 1<<52 {
		t.Fatalf("region 1 of 2 starts at %d, want 2^52", l.Base)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		r    Region
		want string
	}{
		{Region{Name: "EU", Index: 0, Count: 2}, `region.name: "EU"`},
		{Region{Name: "eu", Index: 2, Count: 2}, "region.index: 2"},
		{Region{Name: "eu", Index: 0, Count: 0}, "region.count: 0"},
		{Region{Name: "eu", Index: 0, Count: 2000}, "region.count: 2000"},
	} {
		err := tc.r.Validate()
		if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("%+v: got %v, want an error starting %q", tc.r, err, tc.want)
		}
	}
	if err := (Region{}).Validate(); err != nil {
		t.Errorf("no region: %v", err)
	}
}
