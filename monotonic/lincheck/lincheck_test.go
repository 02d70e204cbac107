package lincheck

import (
	"math/rand"
	"testing"
	"time"
)

func op(sent, recv int, ids ...int64) Op {
	return Op{Sent: time.Duration(sent), Received: time.Duration(recv), IDs: ids}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{"sequential", []Op{op(0, 1, 1), op(2, 3, 2, 3), op(4, 5, 4)}, nil},
		{"concurrent may reorder", []Op{op(0, 10, 5), op(1, 9, 3)}, nil},
		{"touching times are concurrent", []Op{op(0, 5, 5), op(5, 6, 3)}, nil},
		{"backwards", []Op{op(0, 1, 5), op(2, 3, 4)}, []string{"order"}},
		{"overlapping batch", []Op{op(0, 1, 1, 2, 3), op(2, 3, 3, 4)}, []string{"duplicate", "order"}},
		{"duplicate concurrent", []Op{op(0, 10, 7), op(1, 9, 7)}, []string{"duplicate"}},
		{"behind an earlier, not the latest", []Op{op(0, 1, 10), op(2, 3, 11), op(4, 5, 9)}, []string{"order"}},
		{"empty", []Op{op(0, 1)}, []string{"empty"}},
		{"time", []Op{op(3, 1, 1)}, []string{"time"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.ops, 0)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want kinds %v", got, tc.want)
			}
			for i, v := range got {
				if v.Kind != tc.want[i] {
					t.Errorf("violation %d: %+v, want kind %s", i, v, tc.want[i])
				}
			}
		})
	}
}

// brute is the O(n^2) definition Check must agree with (order part).
func brute(ops []Op) bool {
	for _, a := range ops {
		for _, b := range ops {
			if a.Received < b.Sent {
				for _, x := range a.IDs {
					for _, y := range b.IDs {
						if x >= y {
							return false
						}
					}
				}
			}
		}
	}
	return true
}

func TestCheckMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for trial := 0; trial < 2000; trial++ {
		var ops []Op
		next := int64(0)
		for i := 0; i < 2+r.Intn(6); i++ {
			s := r.Intn(20)
			ids := make([]int64, 1+r.Intn(3))
			for k := range ids {
				next += int64(1 + r.Intn(3))
				ids[k] = next
			}
			if r.Intn(4) == 0 { // scramble: IDs handed out of order
				ids[0] = int64(r.Intn(int(next) + 1))
			}
			ops = append(ops, op(s, s+r.Intn(10), ids...))
		}
		var order bool
		for _, v := range Check(ops, 0) {
			order = order || v.Kind == "order"
		}
		if order == brute(ops) {
			t.Fatalf("trial %d: Check says order violation %v, definition says ok=%v: %+v", trial, order, brute(ops), ops)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	ops := make([]Op, 100000)
	for i := range ops {
		ops[i] = op(i*10, i*10+25, int64(i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if v := Check(ops, 1); len(v) != 0 {
			b.Fatal(v)
		}
	}
}
