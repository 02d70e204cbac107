package monotonic

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Peers is the internal HTTP connection between the nodes of a cluster: it
// serves the sources registered with Add to followers (leader side) and
// forwards a follower's requests to a leader (it is a Forwarder). Forwarded
// requests are served only by a proven leader, never forwarded again, so a
// request crosses at most one hop.
//
// Without WithSecret the endpoint is unauthenticated: bind it to
// loopback or a private interface. With it, every forwarded request
// carries the token and the endpoint answers 401 to any other.
type Peers struct {
	ln     net.Listener
	srv    *http.Server
	client *http.Client
	token  string // "": no authentication

	mu      sync.RWMutex
	sources map[string]peerSource
}

// Leading is what Peers serves forwarded requests from: NextLocal
// reserves n IDs only while it is the proven leader, and returns an error
// wrapping ErrFenced otherwise (never forwarding again). *Etcd is one.
type Leading interface {
	NextLocal(ctx context.Context, n int64) (first int64, err error)
}

// peerSource is one source served to peers, with the token forwarded
// requests for it must carry when the Peers has no secret of its own.
type peerSource struct {
	src   Leading
	token string
}

const peerPath = "/idmint-monotonic/v1/next"

// PeerOption configures ListenPeers.
type PeerOption func(*Peers)

// WithSecret authenticates forwarded requests: every node of the cluster
// must be given the same secret. What travels is HMAC-SHA256(secret,
// "idmint monotonic peer v1") as a bearer token, so the secret itself
// (for example the admin token it is derived from) is never sent. An
// empty secret leaves the endpoint unauthenticated.
func WithSecret(secret []byte) PeerOption {
	return func(p *Peers) {
		if len(secret) == 0 {
			p.token = ""
			return
		}
		p.token = peerToken(secret, "")
	}
}

// peerToken is what travels for a secret: HMAC-SHA256(secret, "idmint
// monotonic peer v1" + name), name "" for a node-wide secret.
func peerToken(secret []byte, name string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("idmint monotonic peer v1"))
	if name != "" {
		m.Write([]byte("\x00" + name))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// ListenPeers listens on addr (host:port; port 0 picks one) and serves the
// peer endpoint until Close.
func ListenPeers(addr string, opts ...PeerOption) (*Peers, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("monotonic: peer listener: %w", err)
	}
	p := &Peers{ln: ln, sources: map[string]peerSource{}}
	for _, o := range opts {
		o(p)
	}
	p.client = &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 64,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		IdleConnTimeout:     time.Minute,
	}}
	mux := http.NewServeMux()
	mux.HandleFunc(peerPath, p.serve)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Addr returns the address listened on.
func (p *Peers) Addr() string { return p.ln.Addr().String() }

// Add serves src to peers under name. secret authenticates forwarded
// requests for it when the Peers has none of its own (WithSecret): every
// node must give the same (the server derives it from the key's tokens,
// so that a key with tokens is never served to a peer that cannot prove
// it knows them). An empty secret, with no WithSecret, leaves the source
// unauthenticated.
func (p *Peers) Add(name string, src Leading, secret []byte) {
	ps := peerSource{src: src}
	if p.token == "" && len(secret) > 0 {
		ps.token = peerToken(secret, name)
	}
	p.mu.Lock()
	p.sources[name] = ps
	p.mu.Unlock()
}

// tokenFor is the token requests for name carry and must carry.
func (p *Peers) tokenFor(name string) string {
	if p.token != "" {
		return p.token
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.sources[name].token
}

// Remove stops serving name.
func (p *Peers) Remove(name string) {
	p.mu.Lock()
	delete(p.sources, name)
	p.mu.Unlock()
}

func (p *Peers) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method must be POST", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	name := q.Get("name")
	if want := p.tokenFor(name); want != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			http.Error(w, "peer token missing or wrong: every node needs the same secret (admin_token, or the key's tokens)", http.StatusUnauthorized)
			return
		}
	}
	n, err := strconv.ParseInt(q.Get("n"), 10, 64)
	if err != nil || n < 1 || n > MaxCount {
		http.Error(w, fmt.Sprintf("n %q must be 1..%d", trunc(q.Get("n")), MaxCount), http.StatusBadRequest)
		return
	}
	p.mu.RLock()
	src := p.sources[name].src
	p.mu.RUnlock()
	if src == nil {
		http.Error(w, fmt.Sprintf("no monotonic source %q", trunc(name)), http.StatusNotFound)
		return
	}
	first, err := src.NextLocal(r.Context(), n)
	if err != nil {
		st := http.StatusServiceUnavailable
		if errors.Is(err, ErrBadCount) {
			st = http.StatusBadRequest
		}
		http.Error(w, err.Error(), st)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, strconv.FormatInt(first, 10))
}

// Forward asks the node at addr for n IDs of the source called name.
func (p *Peers) Forward(ctx context.Context, addr, name string, n int64) (int64, error) {
	u := "http://" + addr + peerPath + "?name=" + url.QueryEscape(name) + "&n=" + strconv.FormatInt(n, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return 0, fmt.Errorf("monotonic: forward to %s: %w", addr, err)
	}
	if tok := p.tokenFor(name); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("monotonic: forward to %s: %w", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return 0, fmt.Errorf("monotonic: forward to %s: %w", addr, err)
	}
	body := strings.TrimSpace(string(b))
	switch resp.StatusCode {
	case http.StatusOK:
		v, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("monotonic: forward to %s: bad answer %q", addr, trunc(body))
		}
		return v, nil
	case http.StatusServiceUnavailable:
		return 0, fmt.Errorf("%w: %s answered: %s", ErrFenced, addr, trunc(body))
	case http.StatusUnauthorized:
		return 0, fmt.Errorf("monotonic: forward to %s: the leader refused this node's peer token: every node needs the same secret (admin_token, or the key's tokens)", addr)
	default:
		return 0, fmt.Errorf("monotonic: forward to %s: status %d: %s", addr, resp.StatusCode, trunc(body))
	}
}

// Close stops the listener and closes idle connections.
func (p *Peers) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	p.client.CloseIdleConnections()
	return err
}
