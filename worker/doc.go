// Package worker answers "who am I?" for a snowflake generator: it hands a
// process a worker ID that no other live process holds, and proves it for
// as long as the process issues IDs.
//
// An Assigner grants Leases. A Lease carries
//
//   - the worker ID and a fencing Generation that grows on every
//     acquisition of that ID;
//   - Done, closed when the lease is known lost (the coordinator gave the ID
//     to someone else, the session expired) or closed;
//   - a time horizon (Load, Extend; design.md U3): the highest wall time the
//     holder may stamp, stored in the coordinator and written only while the
//     lease is still held (the write is conditional on the generation), so a
//     new holder of the same ID starts strictly after everything the old one
//     could have issued, whatever its own clock says;
//   - a fence (ValidUntil; design.md U4): the monotonic time until which the
//     lease is proven valid, TTL minus a safety margin after the last
//     keepalive the coordinator confirmed, measured from when that keepalive
//     was sent. A process paused past it (GC, SIGSTOP, VM freeze) finds its
//     fence in the past on wake-up and issues nothing.
//
// The Horizon and Fence method sets match snowflake.Horizon and
// snowflake.Fence, so a *Lease plugs straight into a generator without this
// package importing snowflake (coordination sits below the strategies).
//
// Assigners, by URL scheme (see Open):
//
//	static://3?horizon=/path/f         a fixed ID from config or a flag
//	file:///var/lib/idmint/worker      kept on disk, reused on restart, flock'ed
//	etcd://host:2379/prefix?name=app   lease + keepalive, lowest free ID (recommended)
//	zk://host:2181/snowflake/app       Meituan Leaf's layout; ID = sequence number
//	sqlite:///f.db postgres:// mysql:// uid-generator's WORKER_NODE, stale rows recycled
//	ip://?horizon=/path/f              low 16 bits of a private IPv4 (Sonyflake)
//	mac://?horizon=/path/f             the 48-bit MAC address (128-bit flakes)
//	k8s://?horizon=/path/f             a StatefulSet pod's ordinal (CosId); see NewStatefulSet
//
// static, ip and mac have no coordinator to keep the time horizon in: they
// keep it in the file horizon= names (idmint serve puts one in its data
// directory), or in memory with horizon=memory; without either they refuse
// to grant a lease (ErrNoHorizon).
package worker
