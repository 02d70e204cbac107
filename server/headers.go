package server

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
)

// The headers that tell a client who answered and what the key is, so it
// can talk to a key's leader directly and drop what it buffered when a key
// changes under it. Every HTTP answer carries HeaderNode; answers for a
// key that exists (after its token is checked) carry the other three.
// gRPC sends them as response header metadata, lowercase.
const (
	// HeaderNode names the answering node (Options.NodeName).
	HeaderNode = "Idmint-Node"
	// HeaderStrategy is the key's strategy.
	HeaderStrategy = "Idmint-Strategy"
	// HeaderGeneration is an opaque token that changes whenever the key
	// is built anew on this node: deleted and created again, or the node
	// restarted. Two nodes may send different tokens for one key, so a
	// client compares it per node.
	HeaderGeneration = "Idmint-Key-Generation"
	// HeaderLeader names the node that leads a cluster-wide key (a
	// monotonic key on etcd), as far as the answering node knows; absent
	// when it does not know or the key has no leader.
	HeaderLeader = "Idmint-Leader"
)

// NodeName is the default name of this process: host name and pid, as
// `idmint leaders` lists it.
func NodeName() string {
	h, err := os.Hostname()
	if err != nil {
		h = "unknown-host"
	}
	return fmt.Sprintf("%s (pid %d)", h, os.Getpid())
}

// LeaderReporter is implemented by issuers whose key is served by one
// elected node: LeaderNode is that node's name ("" when unknown).
type LeaderReporter interface {
	LeaderNode() string
}

// generations numbers key builds within this process; with the process's
// start time it makes a token no earlier build of the key on this node
// had, across restarts too.
var generations atomic.Uint64

func newGeneration(startNanos int64) string {
	return strconv.FormatInt(startNanos, 36) + "." + strconv.FormatUint(generations.Add(1), 36)
}

// keyHeaders is what a key says about itself on every answer.
type keyHeaders struct {
	strategy, generation []string
	leaderOf             LeaderReporter
	leader               atomic.Pointer[[]string] // last HeaderLeader value, reused while it holds
}

func (h *keyHeaders) init(strategy string, iss Issuer, startNanos int64) {
	h.strategy = []string{strategy}
	h.generation = []string{newGeneration(startNanos)}
	h.leaderOf, _ = iss.(LeaderReporter)
}

// leaderValue is the key's current HeaderLeader value, nil for none.
func (h *keyHeaders) leaderValue() []string {
	if h.leaderOf == nil {
		return nil
	}
	name := h.leaderOf.LeaderNode()
	if name == "" {
		return nil
	}
	if p := h.leader.Load(); p != nil && (*p)[0] == name {
		return *p
	}
	v := []string{name}
	h.leader.Store(&v)
	return v
}

// set adds the key's headers to an HTTP answer.
func (h *keyHeaders) set(hd http.Header) {
	hd[HeaderStrategy] = h.strategy
	hd[HeaderGeneration] = h.generation
	if v := h.leaderValue(); v != nil {
		hd[HeaderLeader] = v
	}
}
