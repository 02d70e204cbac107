package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
)

// The headers that tell a client who answered and what the key is, so it
// can talk to a key's leader directly and drop what it buffered when a key
// changes under it. Only answers for a key that exists, after its token
// is checked, carry them: a request refused before (no such key, no or a
// wrong token, a bad path) learns neither the node's host name and pid nor
// anything of the key. gRPC sends them as response header metadata,
// lowercase.
const (
	// HeaderNode names the answering node (Options.NodeName).
	HeaderNode = "Idmint-Node"
	// HeaderStrategy is the key's strategy.
	HeaderStrategy = "Idmint-Strategy"
	// HeaderGeneration is an opaque token that changes whenever the key
	// is built anew on this node: deleted and created again, or the node
	// restarted. Two nodes may send different tokens for one key, so a
	// client compares it per node. It says nothing else (not when the
	// process started).
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
// random prefix (generationPrefix) it makes a token no earlier build of
// the key on this node had, across restarts too, without saying when the
// process started (the prefix used to be its start time).
var generations atomic.Uint64

// generationPrefix is 64 random bits, drawn once per process.
var generationPrefix = func() string {
	var b [8]byte
	rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	return hex.EncodeToString(b[:])
}()

func newGeneration() string {
	return generationPrefix + "." + strconv.FormatUint(generations.Add(1), 36)
}

// keyHeaders is what an answer says about the node and the key, once the
// request may use the key.
type keyHeaders struct {
	node, strategy, generation []string
	leaderOf                   LeaderReporter
	leader                     atomic.Pointer[[]string] // last HeaderLeader value, reused while it holds
}

func (h *keyHeaders) init(node []string, strategy string, iss Issuer) {
	h.node = node
	h.strategy = []string{strategy}
	h.generation = []string{newGeneration()}
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

// set adds the node's and the key's headers to an HTTP answer.
func (h *keyHeaders) set(hd http.Header) {
	if h.node != nil {
		hd[HeaderNode] = h.node
	}
	hd[HeaderStrategy] = h.strategy
	hd[HeaderGeneration] = h.generation
	if v := h.leaderValue(); v != nil {
		hd[HeaderLeader] = v
	}
}
