package segment

import (
	"sort"
	"time"
)

// BufferStats describes one of a key's two buffers, as Leaf's /cache view
// shows them.
type BufferStats struct {
	// Pos is the next ID the buffer would hand out (Leaf: value).
	Pos int64
	// Max is the end of the segment, exclusive (Leaf: max).
	Max int64
	// Step is the segment's length (Leaf: step).
	Step int64
	// Ready reports whether the buffer holds a loaded segment.
	Ready bool
}

// Stats is a snapshot of one key's state, for metrics and monitor views.
type Stats struct {
	Key string
	// InitOK reports whether a segment was ever loaded (Leaf: initOk).
	InitOK bool
	// Step is the length of the last segment leased; MinStep the key's
	// configured step.
	Step, MinStep int64
	// Slot is the index in Buffers of the buffer being served (Leaf: pos).
	Slot int
	// NextReady reports whether the other buffer is loaded and waiting.
	NextReady bool
	// Loading reports whether a load is in progress or backing off.
	Loading bool
	// Buffers are the two buffers, indexed by slot.
	Buffers [2]BufferStats
	// Remaining counts the IDs left in both buffers.
	Remaining int64
	// Loads and LoadErrors count successful and failed store allocations.
	Loads, LoadErrors uint64
	// StoreErrors counts the failed allocations retrying may fix (the
	// store down, slow or unreachable), whether or not the double buffer
	// absorbed them; StoreFailing reports whether the last one failed so.
	StoreErrors  uint64
	StoreFailing bool
	// Waits counts calls that found both buffers empty and had to wait
	// for the store (or failed): 0 while the double buffer keeps ahead.
	// A key's first call always waits once.
	Waits uint64
	// LastLoadLatency and TotalLoadLatency time the successful loads.
	LastLoadLatency, TotalLoadLatency time.Duration
	// LastError is the last load's error, "" after a success.
	LastError string
	// WentBack counts the times the store answered below the key's mark
	// (the witness's, or this Allocator's own) and was raised above it: a
	// failover to a lagging replica or a restore. LastWentBack holds the
	// store's max_id and the mark of the last such time.
	WentBack     uint64
	LastWentBack [2]int64
}

func (b *buffer) stats() BufferStats {
	if b == nil || b == exhausted {
		return BufferStats{}
	}
	p := b.pos.Load()
	if p >= b.end || p < b.first {
		p = b.end
	}
	return BufferStats{Pos: p, Max: b.end, Step: b.end - b.start, Ready: true}
}

func (b *buffer) remaining() int64 {
	if b == nil {
		return 0
	}
	p := b.pos.Load()
	if p >= b.end || p < b.first {
		return 0
	}
	return (b.end-p-1)/b.delta + 1
}

// Stats returns a snapshot of the key's buffers and load counters.
func (k *Key) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.cur.Load()
	s := Stats{
		Key: k.name, InitOK: k.loaded, Step: k.step, MinStep: k.minStep,
		NextReady: k.next != nil, Loading: k.loading,
		Loads: k.loads, LoadErrors: k.loadErrors, Waits: k.waits,
		StoreErrors: k.storeErrs, StoreFailing: k.failing,
		LastLoadLatency: k.lastLat, TotalLoadLatency: k.totalLat,
		Remaining: cur.remaining() + k.next.remaining(),
		WentBack:  k.wentBack, LastWentBack: k.lastBack,
	}
	if k.lastErr != nil {
		s.LastError = k.lastErr.Error()
	}
	s.Slot = k.slot
	s.Buffers[k.slot] = cur.stats()
	if k.next != nil {
		s.Buffers[k.next.slot] = k.next.stats()
	}
	return s
}

// Stats returns a snapshot of every key this Allocator has served,
// ordered by key.
func (a *Allocator) Stats() []Stats {
	keys := a.all()
	out := make([]Stats, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.Stats())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
