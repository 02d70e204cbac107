package segment_test

import (
	"testing"

	"github.com/idmint/idmint/segment"
)

// TestLeafSlots: the buffers are numbered as Leaf's SegmentBuffer numbers
// them (Meituan-Dianping/Leaf, SegmentIDGenImpl.get and
// getIdFromSegmentBuffer): the first segment goes into slot 0 and is
// served from slot 0; the next one is loaded into slot 1 and served from
// slot 1 after the switch; the one after that into slot 0 again.
func TestLeafSlots(t *testing.T) {
	t.Parallel()
	_, a, _ := setup(t, 10, segment.Options{Step: segment.StepPolicy{Fixed: true}, LoadAt: 0.5})
	k, _ := a.Key("k")
	if st := k.Stats(); st.Slot != 0 || st.InitOK || st.Buffers != [2]segment.BufferStats{} {
		t.Fatalf("before any call: %+v, want slot 0 and empty buffers", st)
	}
	take(t, k, 1) // 1 from [1,11)
	st := k.Stats()
	if st.Slot != 0 || st.Buffers[0].Max != 11 || st.Buffers[0].Pos != 2 || st.Buffers[1].Ready {
		t.Fatalf("after the first ID: slot %d, buffers %+v; want the first segment [1,11) in slot 0 and slot 1 empty", st.Slot, st.Buffers)
	}
	take(t, k, 5) // 2..6: past the trigger, [11,21) loads into slot 1
	poll(t, "the next segment to load", func() bool { return k.Stats().NextReady })
	st = k.Stats()
	if st.Slot != 0 || st.Buffers[1].Max != 21 || st.Buffers[0].Max != 11 {
		t.Fatalf("preloaded: slot %d, buffers %+v; want [1,11) in slot 0 served, [11,21) waiting in slot 1", st.Slot, st.Buffers)
	}
	take(t, k, 5) // 7..11: the switch to slot 1
	st = k.Stats()
	if st.Slot != 1 || st.Buffers[1].Max != 21 {
		t.Fatalf("after the switch: slot %d, buffers %+v; want slot 1 serving [11,21)", st.Slot, st.Buffers)
	}
	take(t, k, 5) // 12..16: [21,31) loads into slot 0
	poll(t, "the third segment to load", func() bool { return k.Stats().NextReady })
	if st := k.Stats(); st.Slot != 1 || st.Buffers[0].Max != 31 {
		t.Fatalf("third segment: slot %d, buffers %+v; want [21,31) waiting in slot 0", st.Slot, st.Buffers)
	}
}
