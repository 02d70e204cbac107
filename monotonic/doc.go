// Package monotonic issues IDs that increase across a whole cluster in
// real-time order: if one request's answer arrived before another request
// was sent, on any nodes, every ID of the first is below every ID of the
// second (design invariant U8).
//
// The design is TiDB Placement Driver's timestamp oracle: one leader,
// elected through etcd, issues from memory below an upper bound it has
// persisted first; the write of the bound is conditional on its leadership
// (a fence), and a new leader starts strictly above the bound it reads. A
// leader stops issuing as soon as it can no longer prove its leadership on
// its own monotonic clock (the send time of the last confirmed proof: a
// keepalive, then a write conditional on its election key, + TTL -
// margin), so a leader paused past its TTL answers nothing with an old
// value when it wakes, and at once when it sees its key or lease gone (an
// operator's lease revoke or key delete). A new leader issues only once
// its predecessor cannot be issuing any more: TTL after it saw the
// predecessor's last proof, or at once after a clean resignation.
// Followers forward to the leader, coalescing concurrent requests into one
// round trip.
//
// Two forms: Counter (1, 2, 3, ... dense within a leadership term; a
// failover skips at most the unissued part of the bound's window) and
// Timestamp (Unix milliseconds << LogicalBits | a logical counter, never
// behind the last issued value, even when the wall clock steps back).
//
// File is the single-node Source of the zero-config start: the bound lives
// in a file, fsync'd before any value above the old bound is issued.
// Etcd is the cluster Source.
//
// A store that forgets (a key moved from its bound file to etcd when a
// single node grows into a cluster, another etcd prefix, etcd restored
// from an older snapshot) would make a source start below values already
// issued. With a Witness (FileConfig.Witness, EtcdConfig.Witness: the
// node's data directory and the cluster's coordinator, package witness),
// every persisted bound is also raised in the witness before a value up
// to it is issued, and a source starts strictly above the largest of its
// own bound, the witness's mark and EtcdConfig.Floor.
package monotonic
