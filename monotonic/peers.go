package monotonic

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
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
	"sync/atomic"
	"time"
)

// Peers is the internal connection between the nodes of a cluster: it
// serves the sources registered with Add to followers (leader side) and
// forwards a follower's requests to a leader (it is a Forwarder).
// Forwarded requests are served only by a proven leader, never forwarded
// again, so a request crosses at most one hop.
//
// A follower keeps one long-lived stream per leader and source (an HTTP
// upgrade, then small frames: see peerframe.go), so a forwarded batch
// costs one frame each way, not an HTTP request, and many batches may be
// in flight on it. The leader checks the token and its own leadership on
// every frame. A leader without the stream endpoint (an older version) is
// sent one HTTP request per batch, as before.
//
// Without WithSecret the endpoint is unauthenticated: bind it to
// loopback or a private interface. With it, every forwarded request and
// every stream carries the token and the endpoint answers 401 to any
// other.
type Peers struct {
	ln     net.Listener
	srv    *http.Server
	client *http.Client
	token  string // "": no authentication

	mu      sync.RWMutex
	sources map[string]peerSource

	smu     sync.Mutex // the streams
	closed  bool
	streams map[net.Conn]context.CancelFunc // served to followers
	links   map[string]*peerLink            // to leaders, by address and source name
	conns   map[*peerConn]struct{}          // to leaders, open
	dials   atomic.Int64                    // streams opened to leaders
	idle    time.Duration                   // served streams idle this long are closed
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
	p := &Peers{ln: ln, sources: map[string]peerSource{}, streams: map[net.Conn]context.CancelFunc{},
		links: map[string]*peerLink{}, conns: map[*peerConn]struct{}{}, idle: streamIdle}
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
	mux.HandleFunc(streamPath, p.serveStream)
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

// lookup returns the source served as name and the token its requests
// must carry.
func (p *Peers) lookup(name string) (Leading, string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ps := p.sources[name]
	if p.token != "" {
		return ps.src, p.token
	}
	return ps.src, ps.token
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
	if _, ok := p.authorize(w, r, name); !ok {
		return
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

// Forward asks the node at addr for n IDs of the source called name: as
// one frame on the peer stream to that node (opened on first use, kept
// open), or as one HTTP request when the node has no stream endpoint (an
// older version). Concurrent calls share the stream.
func (p *Peers) Forward(ctx context.Context, addr, name string, n int64) (int64, error) {
	if n < 1 || n > MaxCount {
		return 0, fmt.Errorf("%w: %d is not in 1..%d", ErrBadCount, n, MaxCount)
	}
	first, err := p.forwardStream(ctx, addr, name, n)
	if !errors.Is(err, errNoStream) {
		return first, err
	}
	return p.forwardHTTP(ctx, addr, name, n)
}

// forwardHTTP asks for n IDs with one HTTP request.
func (p *Peers) forwardHTTP(ctx context.Context, addr, name string, n int64) (int64, error) {
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

// Close stops the listener and ends every peer stream, served and
// dialed: batches in flight on them fail. Forward fails afterwards.
func (p *Peers) Close() error {
	p.smu.Lock()
	p.closed = true
	p.smu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	p.smu.Lock()
	streams := p.streams
	p.streams = map[net.Conn]context.CancelFunc{}
	conns := make([]*peerConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.smu.Unlock()
	for conn, cancel := range streams {
		cancel()
		conn.Close()
	}
	for _, c := range conns {
		c.fail(fmt.Errorf("this node's peers closed: %w", ErrClosed))
	}
	p.client.CloseIdleConnections()
	return err
}
