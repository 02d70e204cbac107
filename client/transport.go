package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v1 "github.com/idmint/idmint/api/idmintv1"
)

// transport speaks to one endpoint. Both calls return what the answer
// said about its node and key (meta), on errors too when the answer came
// from an idmint node.
type transport interface {
	// rangeOf reserves up to n contiguous numbers: [first, first+count).
	rangeOf(ctx context.Context, key, token string, n int) (first, count int64, m meta, err error)
	// ids returns exactly n IDs; m.strategy is the key's strategy. text
	// is true (and ids empty) when the key issues text IDs.
	ids(ctx context.Context, key, token string, n int) (ids []int64, text bool, m meta, err error)
	close()
}

// meta is what an answer says about the node that sent it and the key:
// the Idmint-Node, Idmint-Strategy, Idmint-Key-Generation and
// Idmint-Leader headers (gRPC: the same, lowercase, as header metadata).
// Fields are "" when absent.
type meta struct {
	node       string // the answering node's name
	strategy   string // the key's strategy
	generation string // opaque; changes when the key is built anew on that node
	leader     string // the name of the node leading the key, as the answering node knows it
}

// The answer headers meta reads.
const (
	headerNode       = "Idmint-Node"
	headerStrategy   = "Idmint-Strategy"
	headerGeneration = "Idmint-Key-Generation"
	headerLeader     = "Idmint-Leader"
)

func metaOfHTTP(h http.Header) meta {
	first := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return meta{node: first(headerNode), strategy: first(headerStrategy), generation: first(headerGeneration), leader: first(headerLeader)}
}

func metaOfGRPC(md metadata.MD) meta {
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return meta{node: first("idmint-node"), strategy: first("idmint-strategy"), generation: first("idmint-key-generation"), leader: first("idmint-leader")}
}

// newTransport builds the transport an endpoint URL names: http://,
// https:// (HTTP), grpc:// (gRPC, plaintext unless opts.TLS is set) or
// grpcs:// (gRPC over TLS).
func newTransport(endpoint string, opts *Options) (transport, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("client: endpoint %q: want http://host:port, https://host:port, grpc://host:port or grpcs://host:port", endpoint)
	}
	switch u.Scheme {
	case "http", "https":
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("client: endpoint %q: must not have a query or fragment", endpoint)
		}
		hc := opts.HTTPClient
		if hc == nil {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 16
			tr.TLSClientConfig = opts.TLS
			hc = &http.Client{Transport: tr}
		}
		return &httpTransport{base: strings.TrimRight(endpoint, "/"), hc: hc}, nil
	case "grpc", "grpcs":
		if u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("client: endpoint %q: a gRPC endpoint has no path", endpoint)
		}
		creds := insecure.NewCredentials()
		if u.Scheme == "grpcs" || opts.TLS != nil {
			tc := opts.TLS
			if tc == nil {
				tc = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			creds = credentials.NewTLS(tc)
		}
		dial := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts.GRPCDialOptions...)
		cc, err := grpc.NewClient(u.Host, dial...)
		if err != nil {
			return nil, fmt.Errorf("client: endpoint %q: %w", endpoint, err)
		}
		return &grpcTransport{cc: cc, c: v1.NewIDsClient(cc)}, nil
	}
	return nil, fmt.Errorf("client: endpoint %q: scheme %q: want http, https, grpc or grpcs", endpoint, u.Scheme)
}

type httpTransport struct {
	base string
	hc   *http.Client
}

func (h *httpTransport) close() {
	if t, ok := h.hc.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
}

// get sends GET url and returns the body of a 200 answer, or an *Error,
// and what the answer's headers said.
func (h *httpTransport) get(ctx context.Context, u, token string, limit int64) ([]byte, meta, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, meta{}, &Error{Endpoint: h.base, Message: err.Error(), Err: err}
	}
	if token != "" {
		req.Header["Authorization"] = []string{"Bearer " + token}
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return nil, meta{}, &Error{Endpoint: h.base, Message: err.Error(), Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	m := metaOfHTTP(resp.Header)
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, m, &Error{Endpoint: h.base, Status: resp.StatusCode, Message: "read answer: " + err.Error(), Retryable: true, Err: err}
	}
	if resp.StatusCode == http.StatusOK {
		if int64(len(body)) > limit {
			return nil, m, &Error{Endpoint: h.base, Status: resp.StatusCode, Message: fmt.Sprintf("answer larger than %d bytes", limit), Retryable: true, Err: errMalformed}
		}
		return body, m, nil
	}
	return nil, m, httpError(h.base, resp, body)
}

// httpError classifies an error answer. 400, 401, 403 and a 404 that
// names an unknown key are the request's fault and permanent; everything
// else (5xx, 429, 408, a 404 or 405 from something that is not an idmint
// endpoint) is the endpoint's, and retryable elsewhere.
func httpError(base string, resp *http.Response, body []byte) *Error {
	e := &Error{Endpoint: base, Status: resp.StatusCode}
	var v struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && v.Error.Code != "" {
		e.Code, e.Message, e.Field = v.Error.Code, v.Error.Message, v.Error.Field
	} else {
		e.Message = fmt.Sprintf("HTTP %d: %q", resp.StatusCode, trunc(string(body)))
	}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now)
	switch {
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusUnauthorized,
		resp.StatusCode == http.StatusForbidden, resp.StatusCode == http.StatusRequestEntityTooLarge:
		e.Retryable = false
	case resp.StatusCode == http.StatusNotFound && e.Code == "unknown_key":
		e.Retryable = false
	default:
		e.Retryable = true
	}
	return e
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an
// HTTP-date (RFC 9110 section 10.2.3). Anything else is 0.
func parseRetryAfter(v string, now func() time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now()); d > 0 {
			return min(d, time.Hour)
		}
	}
	return 0
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

var errMalformed = errors.New("malformed answer")

func (h *httpTransport) malformed(what string, body []byte, detail string) *Error {
	return &Error{Endpoint: h.base, Status: http.StatusOK, Message: fmt.Sprintf("%s: %s in %q", what, detail, trunc(string(body))), Retryable: true, Err: errMalformed}
}

func (h *httpTransport) rangeOf(ctx context.Context, key, token string, n int) (int64, int64, meta, error) {
	first, count, m, err := h.rangeBody(ctx, key, token, n)
	return first, count, m, err
}

func (h *httpTransport) rangeBody(ctx context.Context, key, token string, n int) (int64, int64, meta, error) {
	body, m, err := h.get(ctx, h.base+"/v1/keys/"+url.PathEscape(key)+"/range?count="+strconv.Itoa(n), token, 4096)
	if err != nil {
		return 0, 0, m, err
	}
	var v struct {
		Key   string `json:"key"`
		First string `json:"first"`
		Last  string `json:"last"`
		Count int64  `json:"count"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, 0, m, h.malformed("range answer", body, err.Error())
	}
	first, err1 := strconv.ParseInt(v.First, 10, 64)
	last, err2 := strconv.ParseInt(v.Last, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, m, h.malformed("range answer", body, err.Error())
	}
	if v.Key != key || v.Count < 1 || v.Count > int64(n) || first > last || last-first+1 != v.Count {
		return 0, 0, m, h.malformed("range answer", body, fmt.Sprintf("key %q, first %d, last %d, count %d for %d asked of key %q", v.Key, first, last, v.Count, n, key))
	}
	return first, v.Count, m, nil
}

func (h *httpTransport) ids(ctx context.Context, key, token string, n int) ([]int64, bool, meta, error) {
	body, m, err := h.get(ctx, h.base+"/v1/keys/"+url.PathEscape(key)+"/ids?count="+strconv.Itoa(n), token, int64(4096+n*48))
	if err != nil {
		return nil, false, m, err
	}
	var v struct {
		Key      string   `json:"key"`
		Strategy string   `json:"strategy"`
		IDs      []string `json:"ids"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, false, m, h.malformed("ids answer", body, err.Error())
	}
	if v.Key != key || v.Strategy == "" || len(v.IDs) != n {
		return nil, false, m, h.malformed("ids answer", body, fmt.Sprintf("key %q, strategy %q, %d IDs for %d asked of key %q", v.Key, v.Strategy, len(v.IDs), n, key))
	}
	m.strategy = v.Strategy // the body says it too, also from servers without the header
	out := make([]int64, n)
	for i, s := range v.IDs {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			// Not a number: a text key (the first ID tells) or garbage.
			if i == 0 {
				return nil, true, m, nil
			}
			return nil, false, m, h.malformed("ids answer", body, err.Error())
		}
		out[i] = id
	}
	return out, false, m, nil
}

type grpcTransport struct {
	cc *grpc.ClientConn
	c  v1.IDsClient
}

func (g *grpcTransport) close() { g.cc.Close() }

func (g *grpcTransport) ctx(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// grpcError classifies a gRPC failure like httpError does.
func (g *grpcTransport) err(err error, trailer metadata.MD) *Error {
	st, _ := status.FromError(err)
	e := &Error{Endpoint: g.cc.Target(), Message: st.Message(), Code: st.Code().String(), Err: err}
	if v := trailer.Get("retry-after"); len(v) > 0 {
		e.RetryAfter = parseRetryAfter(v[0], time.Now)
	}
	switch st.Code() {
	case codes.InvalidArgument:
		e.Status, e.Code = http.StatusBadRequest, "invalid_argument"
		if f, _, ok := strings.Cut(e.Message, ": "); ok && !strings.Contains(f, " ") {
			e.Field = f
		}
	case codes.NotFound:
		e.Status, e.Code = http.StatusNotFound, "unknown_key"
	case codes.Unauthenticated:
		e.Status, e.Code = http.StatusUnauthorized, "unauthorized"
	case codes.PermissionDenied:
		e.Status, e.Code = http.StatusForbidden, "forbidden"
	case codes.ResourceExhausted:
		e.Status, e.Retryable = http.StatusTooManyRequests, true
	default:
		// Unavailable, DeadlineExceeded, Internal, Unknown, Canceled...
		e.Status, e.Retryable = http.StatusServiceUnavailable, true
	}
	return e
}

func (g *grpcTransport) rangeOf(ctx context.Context, key, token string, n int) (int64, int64, meta, error) {
	var hd, tr metadata.MD
	r, err := g.c.NextRange(g.ctx(ctx, token), &v1.NextRangeRequest{Key: key, Count: uint32(n)}, grpc.Header(&hd), grpc.Trailer(&tr))
	m := metaOfGRPC(hd)
	if err != nil {
		return 0, 0, m, g.err(err, tr)
	}
	if r.GetKey() != key || r.GetCount() < 1 || r.GetCount() > int64(n) || r.GetFirst() > r.GetFirst()+r.GetCount()-1 {
		return 0, 0, m, &Error{Endpoint: g.cc.Target(), Message: fmt.Sprintf("range answer: key %q, first %d, count %d for %d asked of key %q", r.GetKey(), r.GetFirst(), r.GetCount(), n, key), Retryable: true, Err: errMalformed}
	}
	return r.GetFirst(), r.GetCount(), m, nil
}

func (g *grpcTransport) ids(ctx context.Context, key, token string, n int) ([]int64, bool, meta, error) {
	var hd, tr metadata.MD
	// Fixed: the IDs come as 8-byte integers, copied out instead of one
	// varint decode each; a server that predates it answers Ids.
	r, err := g.c.NextIDs(g.ctx(ctx, token), &v1.NextIDsRequest{Key: key, Count: uint32(n), Fixed: true}, grpc.Header(&hd), grpc.Trailer(&tr))
	m := metaOfGRPC(hd)
	if err != nil {
		return nil, false, m, g.err(err, tr)
	}
	if r.GetStrategy() != "" {
		m.strategy = r.GetStrategy()
	}
	ids, derr := r.NumericIDs(nil)
	if len(r.GetTextIds()) == n && len(ids) == 0 && r.GetStrategy() != "" {
		return nil, true, m, nil
	}
	if derr != nil || r.GetKey() != key || r.GetStrategy() == "" || len(ids) != n {
		return nil, false, m, &Error{Endpoint: g.cc.Target(), Message: fmt.Sprintf("ids answer: key %q, strategy %q, %d IDs for %d asked of key %q", r.GetKey(), r.GetStrategy(), len(ids), n, key), Retryable: true, Err: errMalformed}
	}
	return ids, false, m, nil
}
