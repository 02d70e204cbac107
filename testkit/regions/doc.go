// Package regions proves, on one machine, that two regions sharing no
// store and no coordinator never issue the same ID: each region runs its
// own etcd, its own PostgreSQL (one of them with a streaming replica) and
// three real `idmint serve` processes; load generators draw IDs of several
// strategies from both while the link between the regions is cut, a
// region's database fails over to a lagging replica, a region's etcd is
// lost and restored, and an operator moves a node from one region to the
// other. Every ID is kept and checked. It has tests only; the long run is
// scripts/regions-soak.sh.
package regions
