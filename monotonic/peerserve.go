package monotonic

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// The leader's side of the peer stream: one long-lived connection per
// follower and source, carrying many forwarded batches without an HTTP
// request each (see peerframe.go for the frames).

const (
	streamPath  = "/idmint-monotonic/v1/stream"
	streamProto = "idmint-peer/1"
	// peerWriteTimeout bounds one write of frames to a peer.
	peerWriteTimeout = 10 * time.Second
	// streamFlushAt is how many bytes of answers are held back, while more
	// requests are already buffered, before they are written anyway.
	streamFlushAt = 32 << 10
	// streamIdle is how long a served stream may go without a request.
	streamIdle = 5 * time.Minute
)

// serveStream upgrades an authenticated POST to streamPath to a peer
// stream and serves its frames until the follower hangs up, a frame is
// malformed, the source's secret changes, or Close.
func (p *Peers) serveStream(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method must be POST", http.StatusMethodNotAllowed)
		return
	}
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), streamProto) {
		http.Error(w, fmt.Sprintf("upgrade %q: the peer stream needs Connection: Upgrade and Upgrade: %s", trunc(r.Header.Get("Upgrade")), streamProto),
			http.StatusBadRequest)
		return
	}
	name := r.URL.Query().Get("name")
	authed, ok := p.authorize(w, r, name)
	if !ok {
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "this connection cannot be upgraded", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	// The http.Server's deadlines were for one request; a stream has its own.
	_ = conn.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !p.track(conn, cancel) {
		return // closing
	}
	defer p.untrack(conn)
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + streamProto + "\r\n\r\n"); err != nil {
		return
	}
	if err := rw.Flush(); err != nil {
		return
	}
	p.streamLoop(ctx, conn, rw.Reader, name, authed)
}

// streamLoop answers request frames in the order they come. Answers are
// written when no further request is already buffered (or many have
// piled up), so a burst of requests costs one write.
func (p *Peers) streamLoop(ctx context.Context, conn net.Conn, br *bufio.Reader, name, authed string) {
	buf := make([]byte, frameHeader+frameMaxText)
	out := make([]byte, 0, 4096)
	flush := func() bool {
		if len(out) == 0 {
			return true
		}
		// Socket deadlines are wall-clock times by the net package's API.
		_ = conn.SetWriteDeadline(time.Now().Add(peerWriteTimeout))
		_, err := conn.Write(out)
		out = out[:0]
		return err == nil
	}
	refuse := func(err error) {
		out = appendFrame(out, frame{kind: frameError, value: int64(codeBadFrame), text: "monotonic peer stream: " + err.Error()})
		flush()
	}
	for {
		if br.Buffered() == 0 || len(out) >= streamFlushAt {
			if !flush() {
				return
			}
		}
		if br.Buffered() == 0 {
			// A stream left idle this long is closed; its follower dials
			// again for its next batch.
			_ = conn.SetReadDeadline(time.Now().Add(p.idle))
		}
		f, err := readFrame(br, buf)
		if err != nil {
			if errors.Is(err, errBadFrame) {
				refuse(err)
			}
			return // the follower hung up or left it idle, or Close
		}
		switch {
		case f.kind != frameNext:
			refuse(fmt.Errorf("%w: kind %d: a follower sends only requests (kind %d)", errBadFrame, f.kind, frameNext))
			return
		case f.id == 0:
			refuse(fmt.Errorf("%w: request id 0 (ids start at 1)", errBadFrame))
			return
		}
		var closing bool
		out, closing = p.answer(ctx, out, name, authed, f)
		if closing {
			flush()
			return
		}
	}
}

// answer serves one request frame and appends the answer to out; closing
// says the stream must end after it (the source's secret changed).
func (p *Peers) answer(ctx context.Context, out []byte, name, authed string, f frame) (_ []byte, closing bool) {
	refuse := func(code errCode, text string) []byte {
		return appendFrame(out, frame{kind: frameError, id: f.id, value: int64(code), text: text})
	}
	src, want := p.lookup(name)
	// Checked on every frame: a key whose tokens (or a node whose
	// admin_token) changed stops serving streams opened with the old ones.
	if want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(authed)) != 1 {
		return refuse(codeUnauthorized, "peer token no longer valid: every node needs the same secret (admin_token, or the key's tokens)"), true
	}
	if src == nil {
		return refuse(codeNoSource, fmt.Sprintf("no monotonic source %q", trunc(name))), false
	}
	if f.value < 1 || f.value > MaxCount {
		return refuse(codeBadCount, fmt.Sprintf("count %d must be 1..%d", f.value, MaxCount)), false
	}
	first, err := src.NextLocal(ctx, f.value) // the term's fence is checked here, for every frame
	if err != nil {
		code := codeUnavailable
		if errors.Is(err, ErrBadCount) {
			code = codeBadCount
		}
		return refuse(code, err.Error()), false
	}
	return appendFrame(out, frame{kind: frameIDs, id: f.id, value: first}), false
}

// authorize checks the bearer token a request for name must carry and
// returns it; it answers 401 itself when the token is missing or wrong.
func (p *Peers) authorize(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	want := p.tokenFor(name)
	if want == "" {
		return "", true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		http.Error(w, "peer token missing or wrong: every node needs the same secret (admin_token, or the key's tokens)", http.StatusUnauthorized)
		return "", false
	}
	return want, true
}

// headerHasToken reports whether the comma-separated header name lists
// token (case-insensitive), as Connection: keep-alive, Upgrade does.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// track registers a served stream so Close can end it; false once closed.
func (p *Peers) track(conn net.Conn, cancel context.CancelFunc) bool {
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.closed {
		return false
	}
	p.streams[conn] = cancel
	return true
}

func (p *Peers) untrack(conn net.Conn) {
	p.smu.Lock()
	delete(p.streams, conn)
	p.smu.Unlock()
}
