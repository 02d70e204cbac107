// Package mutate names mistakes that were once made in idmint's protocol
// code and fixed, so that a test can put one back into the real code and
// show that it would be caught. The simulator (testkit/sim) is its user.
//
// Production code never sets a mutation: the options that take a *Set are
// exported by worker and snowflake, but their parameter type lives in this
// internal package, so code outside the module can pass only nil.
package mutate

// Flag is one mistake.
type Flag uint32

const (
	// LeaseReviveAfterLoss lets a keepalive confirmation that arrives after
	// the lease was lost (a write answered "lease gone") raise its validity
	// again, so the holder issues on a lease the coordinator gave away.
	LeaseReviveAfterLoss Flag = 1 << iota
	// LeaseDeadlineFromReply takes a keepalive's validity from the time its
	// reply arrived instead of the time it was sent: a slow reply stretches
	// the lease past the coordinator's expiry.
	LeaseDeadlineFromReply
	// PastHorizon lets a snowflake generator stamp one tick past the
	// horizon the coordinator recorded.
	PastHorizon
	// SecondLeader lets a deposed monotonic leader go on issuing until its
	// own deadline although it saw its election key deleted, and lets its
	// successor issue at once instead of waiting out the predecessor's
	// last proof: after a lease revoke two leaders answer at once.
	SecondLeader
	// NoHandoverWait lets a new monotonic leader issue at once instead of
	// waiting one TTL after its predecessor's last proof; the deposed
	// leader still fences when it sees its key deleted, but one cut off
	// from etcd answers from memory until its own deadline.
	NoHandoverWait
	// IgnoreWitness lets a new monotonic leader start above the etcd
	// bound alone, ignoring the witness's mark and the configured floor:
	// after etcd is restored from an older snapshot it issues values
	// again.
	IgnoreWitness
	// TrustRestoredKey lets a monotonic leader whose watch broke go on
	// leading when it finds its election key again (read afresh, with the
	// create revision it was elected with), and count a proof without
	// waiting for its watch to deliver it: etcd restored from a snapshot
	// taken while the leader, since deposed, held its lease brings the key
	// back, and the leader answers beside the one elected meanwhile.
	TrustRestoredKey
)

// Set is the mistakes put back into one component.
type Set struct{ flags Flag }

// New returns a set of the given mistakes.
func New(f ...Flag) *Set {
	s := &Set{}
	for _, x := range f {
		s.flags |= x
	}
	return s
}

// Has reports whether f is put back; a nil set has none.
func (s *Set) Has(f Flag) bool { return s != nil && s.flags&f != 0 }
