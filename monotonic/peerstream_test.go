package monotonic

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// counterSource is a Leading that hands out consecutive IDs from memory;
// while hold is set, NextLocal reserves its IDs and then waits for it to
// close, so a test can break the connection with a batch in flight.
type counterSource struct {
	mu      sync.Mutex
	last    int64
	fenced  bool
	hold    chan struct{}
	holding chan struct{} // receives once per held call, after its IDs are reserved
}

func (s *counterSource) NextLocal(ctx context.Context, n int64) (int64, error) {
	s.mu.Lock()
	if s.fenced {
		s.mu.Unlock()
		return 0, fmt.Errorf("%w: test", ErrFenced)
	}
	first := s.last + 1
	s.last += n
	hold, holding := s.hold, s.holding
	s.mu.Unlock()
	if hold != nil {
		holding <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return first, nil
}

func listenT(t *testing.T, addr string, opts ...PeerOption) *Peers {
	t.Helper()
	p, err := ListenPeers(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPeerStreamShared: concurrent forwards share one stream; every answer
// is a range of its own, none overlapping.
func TestPeerStreamShared(t *testing.T) {
	t.Parallel()
	leader, follower := listenT(t, "127.0.0.1:0"), listenT(t, "127.0.0.1:0")
	leader.Add("k", &counterSource{}, nil)
	ctx := ctxT(t)
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := int64(1 + i%3)
				first, err := follower.Forward(ctx, leader.Addr(), "k", n)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for id := first; id < first+n; id++ {
					if seen[id] {
						mu.Unlock()
						errs <- fmt.Errorf("ID %d answered twice", id)
						return
					}
					seen[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if want := 16 * 399; len(seen) != want { // 200 calls of 1, 2, 3, 1, ... IDs each
		t.Fatalf("%d IDs, want %d", len(seen), want)
	}
	if d := follower.dials.Load(); d != 1 {
		t.Fatalf("%d streams dialed for one leader and key, want 1", d)
	}
}

// TestPeerStreamBrokenMidBatch: the leader's listener is closed (its
// streams with it) while a batch is in flight there. The caller gets an
// error at once, not an answer; the IDs the leader had reserved for it
// are never handed out; once the leader listens again the next batch
// dials a new stream and gets IDs above them.
func TestPeerStreamBrokenMidBatch(t *testing.T) {
	t.Parallel()
	src := &counterSource{}
	leader, follower := listenT(t, "127.0.0.1:0"), listenT(t, "127.0.0.1:0")
	leader.Add("k", src, nil)
	addr := leader.Addr()
	ctx := ctxT(t)
	if _, err := follower.Forward(ctx, addr, "k", 5); err != nil { // 1..5
		t.Fatal(err)
	}
	hold := make(chan struct{})
	src.mu.Lock()
	src.hold, src.holding = hold, make(chan struct{}, 1)
	holding := src.holding
	src.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := follower.Forward(ctx, addr, "k", 10) // reserves 6..15, never delivered
		done <- err
	}()
	select {
	case <-holding:
	case <-ctx.Done():
		t.Fatal("the batch never reached the leader")
	}
	closed := make(chan struct{})
	go func() { leader.Close(); close(closed) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "peer stream lost") {
			t.Fatalf("the batch in flight got %v, want a lost-stream error", err)
		}
	case <-ctx.Done():
		t.Fatal("the batch in flight never failed after the leader's listener closed")
	}
	close(hold) // the leader's handler finishes; its answer has nowhere to go
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the leader's Close did not return")
	}
	src.mu.Lock()
	src.hold = nil
	src.mu.Unlock()
	// While nothing listens, forwards fail with an error, not a hang.
	if _, err := follower.Forward(ctx, addr, "k", 1); err == nil {
		t.Fatal("a forward to a closed listener succeeded")
	}
	follower.smu.Lock()
	links, conns := len(follower.links), len(follower.conns)
	follower.smu.Unlock()
	if links != 0 || conns != 0 {
		t.Fatalf("after the leader went away: %d links and %d streams kept, want none", links, conns)
	}
	again := listenT(t, addr) // the same address, as a restarted node's listener
	again.Add("k", src, nil)
	first, err := follower.Forward(ctx, addr, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	if first != 16 {
		t.Fatalf("after the break: first %d, want 16 (6..15 were reserved for the lost answer)", first)
	}
	if d := follower.dials.Load(); d != 2 {
		t.Fatalf("%d streams dialed, want 2 (one before the break, one after)", d)
	}
}

// TestPeerStreamFenced: a leader that is no longer the proven leader
// refuses the frames of a stream opened while it led, with ErrFenced, on
// the same connection.
func TestPeerStreamFenced(t *testing.T) {
	t.Parallel()
	src := &counterSource{}
	leader, follower := listenT(t, "127.0.0.1:0"), listenT(t, "127.0.0.1:0")
	leader.Add("k", src, nil)
	ctx := ctxT(t)
	if _, err := follower.Forward(ctx, leader.Addr(), "k", 1); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	src.fenced = true
	src.mu.Unlock()
	_, err := follower.Forward(ctx, leader.Addr(), "k", 1)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed leader: %v, want ErrFenced", err)
	}
	if d := follower.dials.Load(); d != 1 {
		t.Fatalf("%d streams dialed, want the first one still", d)
	}
}

// TestPeerStreamSecretChanged: a stream opened with a key's tokens stops
// being served the moment the key's tokens change.
func TestPeerStreamSecretChanged(t *testing.T) {
	t.Parallel()
	src := &counterSource{}
	leader, follower := listenT(t, "127.0.0.1:0"), listenT(t, "127.0.0.1:0")
	leader.Add("k", src, []byte("tokens-before"))
	follower.Add("k", nil, []byte("tokens-before"))
	ctx := ctxT(t)
	if _, err := follower.Forward(ctx, leader.Addr(), "k", 1); err != nil {
		t.Fatal(err)
	}
	leader.Add("k", src, []byte("tokens-after"))
	_, err := follower.Forward(ctx, leader.Addr(), "k", 1)
	if err == nil || !strings.Contains(err.Error(), "refused this node's peer token") {
		t.Fatalf("after the tokens changed: %v, want the token refused", err)
	}
	// The leader ends that stream; the follower has let it go before the
	// refusal reached its caller, so the next batch dials again.
	follower.smu.Lock()
	conns := len(follower.conns)
	follower.smu.Unlock()
	if conns != 0 {
		t.Fatalf("after the token was refused: %d streams kept, want none", conns)
	}
	// A new stream with the old tokens is refused at the handshake.
	_, err = follower.Forward(ctx, leader.Addr(), "k", 1)
	if err == nil || !strings.Contains(err.Error(), "refused this node's peer token") {
		t.Fatalf("a new stream with the old tokens: %v, want the token refused", err)
	}
}

// rawStream opens a stream to p by hand and returns the connection and
// its reader.
func rawStream(t *testing.T, addr, name string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s?name=%s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\nContent-Length: 0\r\n\r\n", streamPath, name, addr, streamProto)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: status %d", resp.StatusCode)
	}
	return conn, br
}

// TestPeerStreamBadFrames: a malformed frame gets an error frame naming
// what is wrong, then the connection closes; the leader goes on serving.
// A count out of range is refused for that request only.
func TestPeerStreamBadFrames(t *testing.T) {
	t.Parallel()
	leader := listenT(t, "127.0.0.1:0")
	leader.Add("k", &counterSource{}, nil)
	raw := func(size uint32, kind byte, id uint64, value int64) []byte {
		b := appendFrame(nil, frame{kind: kind, id: id, value: value})
		b[0], b[1], b[2], b[3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
		return b
	}
	for _, tc := range []struct {
		name string
		send []byte
		want string
	}{
		{"unknown kind", raw(17, 9, 1, 1), "kind 9 is not"},
		{"answer kind from a follower", raw(17, frameIDs, 1, 1), "a follower sends only requests"},
		{"size too large", raw(1<<30, frameNext, 1, 1), "size 1073741824 is not in 17..1041"},
		{"size too small", raw(3, frameNext, 1, 1), "size 3 is not in 17..1041"},
		{"size wrong for kind", append(raw(18, frameNext, 1, 1), 0), "kind 1 has size 18, want 17"},
		{"request id 0", raw(17, frameNext, 0, 1), "request id 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, br := rawStream(t, leader.Addr(), "k")
			if _, err := conn.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			f, err := readFrame(br, make([]byte, frameHeader+frameMaxText))
			if err != nil {
				t.Fatalf("no error frame: %v", err)
			}
			if f.kind != frameError || errCode(f.value) != codeBadFrame || f.id != 0 || !strings.Contains(f.text, tc.want) {
				t.Fatalf("got %+v, want a bad-frame error for the connection containing %q", f, tc.want)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("after a bad frame: %v, want the connection closed", err)
			}
		})
	}
	t.Run("count out of range", func(t *testing.T) {
		conn, br := rawStream(t, leader.Addr(), "k")
		var b []byte
		b = appendFrame(b, frame{kind: frameNext, id: 1, value: MaxCount + 1})
		b = appendFrame(b, frame{kind: frameNext, id: 2, value: 0})
		b = appendFrame(b, frame{kind: frameNext, id: 3, value: 2})
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, frameHeader+frameMaxText)
		for _, want := range []string{"count 1048577 must be 1..1048576", "count 0 must be 1..1048576"} {
			f, err := readFrame(br, buf)
			if err != nil || f.kind != frameError || errCode(f.value) != codeBadCount || f.text != want {
				t.Fatalf("got %+v, %v; want a bad-count refusal %q", f, err, want)
			}
		}
		f, err := readFrame(br, buf)
		if err != nil || f.kind != frameIDs || f.id != 3 || f.value != 1 {
			t.Fatalf("the good request after two bad counts: %+v, %v; want IDs from 1", f, err)
		}
	})
	t.Run("no such source", func(t *testing.T) {
		conn, br := rawStream(t, leader.Addr(), "nope")
		if _, err := conn.Write(appendFrame(nil, frame{kind: frameNext, id: 1, value: 1})); err != nil {
			t.Fatal(err)
		}
		f, err := readFrame(br, make([]byte, frameHeader+frameMaxText))
		if err != nil || errCode(f.value) != codeNoSource || f.text != `no monotonic source "nope"` {
			t.Fatalf("got %+v, %v", f, err)
		}
	})
	t.Run("handshake", func(t *testing.T) {
		for _, tc := range []struct {
			method, upgrade string
			status          int
			want            string
		}{
			{http.MethodGet, streamProto, http.StatusMethodNotAllowed, "method must be POST"},
			{http.MethodPost, "", http.StatusBadRequest, "needs Connection: Upgrade and Upgrade: idmint-peer/1"},
			{http.MethodPost, "websocket", http.StatusBadRequest, `upgrade "websocket"`},
		} {
			req, _ := http.NewRequest(tc.method, "http://"+leader.Addr()+streamPath+"?name=k", nil)
			if tc.upgrade != "" {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", tc.upgrade)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("%s upgrade %q: %d %q, want %d containing %q", tc.method, tc.upgrade, resp.StatusCode, body, tc.status, tc.want)
			}
		}
	})
	// After all that, the leader still serves.
	follower := listenT(t, "127.0.0.1:0")
	if _, err := follower.Forward(ctxT(t), leader.Addr(), "k", 1); err != nil {
		t.Fatal(err)
	}
}

// TestPeerStreamIdle: the leader closes a stream left without requests
// for its idle time; the follower's next batch dials a new one.
func TestPeerStreamIdle(t *testing.T) {
	t.Parallel()
	leader, follower := listenT(t, "127.0.0.1:0"), listenT(t, "127.0.0.1:0")
	leader.idle = 50 * time.Millisecond
	leader.Add("k", &counterSource{}, nil)
	conn, br := rawStream(t, leader.Addr(), "k")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle stream: %v, want it closed by the leader within 10s", err)
	}
	ctx := ctxT(t)
	if _, err := follower.Forward(ctx, leader.Addr(), "k", 1); err != nil {
		t.Fatal(err)
	}
	testserver.Eventually(t, "the follower's idle stream closed", 10*time.Second, func() bool {
		follower.smu.Lock()
		defer follower.smu.Unlock()
		return len(follower.conns) == 0
	})
	if first, err := follower.Forward(ctx, leader.Addr(), "k", 1); err != nil || first != 2 {
		t.Fatalf("after the idle close: %d, %v; want 2 on a new stream", first, err)
	}
	if d := follower.dials.Load(); d != 2 {
		t.Fatalf("%d streams dialed, want 2", d)
	}
}

// fakeLeader accepts one stream at a time, answers the handshake and then
// lets answer write whatever it likes for each request frame.
func fakeLeader(t *testing.T, answer func(req frame) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+streamProto+"\r\n\r\n")
				buf := make([]byte, frameHeader+frameMaxText)
				for {
					f, err := readFrame(br, buf)
					if err != nil {
						return
					}
					if _, err := conn.Write(answer(f)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPeerStreamBadAnswers: a leader that answers with a malformed frame,
// an answer to a request never sent or a negative ID makes the batch fail
// with an error saying so (and the stream close), never a panic or an ID.
func TestPeerStreamBadAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(req frame) []byte
		want   string
	}{
		{"garbage", func(frame) []byte { return bytes.Repeat([]byte{0xff}, 30) }, "bad frame"},
		{"unknown kind", func(f frame) []byte { return appendFrame(nil, frame{kind: 7, id: f.id}) }, "kind 7 is not"},
		{"request id never sent", func(f frame) []byte { return appendFrame(nil, frame{kind: frameIDs, id: f.id + 100, value: 1}) }, "never sent"},
		{"negative ID", func(f frame) []byte { return appendFrame(nil, frame{kind: frameIDs, id: f.id, value: -5}) }, "first ID -5 is negative"},
		{"a request back", func(f frame) []byte { return appendFrame(nil, frame{kind: frameNext, id: f.id, value: 1}) }, "is a request"},
		{"no answer", func(frame) []byte { return nil }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := fakeLeader(t, tc.answer)
			follower := listenT(t, "127.0.0.1:0")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			first, err := follower.Forward(ctx, addr, "k", 1)
			if tc.name == "no answer" {
				// The fake answers nothing (an empty write); the caller's
				// deadline ends the wait with an error, and the stream,
				// silent all that time, is given up: the next batch dials.
				if err == nil || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %d, %v; want the deadline", first, err)
				}
				ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel2()
				_, _ = follower.Forward(ctx2, addr, "k", 1)
				if d := follower.dials.Load(); d != 2 {
					t.Fatalf("%d streams dialed, want a second one after the first stayed silent", d)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %d, %v; want an error containing %q", first, err, tc.want)
			}
		})
	}
}

// TestPeerStreamOldLeader: a leader without the stream endpoint (an older
// version) is forwarded to over one HTTP request per batch.
func TestPeerStreamOldLeader(t *testing.T) {
	t.Parallel()
	var calls sync.Map
	mux := http.NewServeMux()
	n := int64(0)
	var mu sync.Mutex
	mux.HandleFunc(peerPath, func(w http.ResponseWriter, r *http.Request) {
		calls.Store(r.URL.RawQuery, true)
		mu.Lock()
		n++
		v := n
		mu.Unlock()
		fmt.Fprint(w, v*100)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	follower := listenT(t, "127.0.0.1:0")
	ctx := ctxT(t)
	for want := int64(100); want <= 300; want += 100 {
		first, err := follower.Forward(ctx, ln.Addr().String(), "k", 7)
		if err != nil || first != want {
			t.Fatalf("got %d, %v; want %d", first, err, want)
		}
	}
	if _, ok := calls.Load("name=k&n=7"); !ok {
		t.Fatal("the old endpoint was not asked")
	}
	if d := follower.dials.Load(); d != 0 {
		t.Fatalf("%d streams opened to a leader without the endpoint", d)
	}
}

// FuzzReadFrame: any bytes give a frame or an error, never a panic, and a
// frame read back re-encodes to the bytes it came from.
func FuzzReadFrame(f *testing.F) {
	f.Add(appendFrame(nil, frame{kind: frameNext, id: 1, value: 3}))
	f.Add(appendFrame(nil, frame{kind: frameError, id: 2, value: 1, text: "monotonic: not the proven leader"}))
	f.Add([]byte{0, 0, 0, 17, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := readFrame(bytes.NewReader(b), make([]byte, frameHeader+frameMaxText))
		if err != nil {
			return
		}
		again := appendFrame(nil, fr)
		if !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("%x read as %+v re-encodes to %x", b, fr, again)
		}
	})
}
