package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/client/internal/answer"
)

// transport speaks to one endpoint: httpTransport, or a Dialer's
// Transport (dialed). Both calls return what the answer said about its
// node and key (meta), on errors too when the answer came from an idmint
// node.
type transport interface {
	// rangeOf reserves up to n contiguous numbers: [first, first+count).
	rangeOf(ctx context.Context, key, token string, n int) (first, count int64, m meta, err error)
	// ids returns exactly n IDs; m.strategy is the key's strategy. text
	// is true (and ids empty) when the key issues text IDs.
	ids(ctx context.Context, key, token string, n int) (ids []int64, text bool, m meta, err error)
	close()
}

// meta is Meta inside the client.
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

// Transport speaks to one endpoint of a scheme the client does not speak
// itself; a Dialer builds it. Package client/grpctransport has the gRPC
// one. Its methods are called concurrently.
//
// Both calls return what the answer said about its node and key (Meta),
// on errors too when the answer came from an idmint node. A failure is an
// *Error: Retryable says whether another endpoint, or this one later, may
// succeed (network failures, timeouts, overload, malformed answers), and
// Status, Code and Field say what the server refused (400, 401, 403 and
// an unknown key are permanent). Any other error is permanent. An answer
// that breaks the rules below (an empty range, fewer or more IDs than
// asked) is taken as a malformed answer, retryable: the endpoint backs off
// as after a failure.
type Transport interface {
	// Range reserves up to n contiguous numbers of key: [first,
	// first+count), 1 <= count <= n.
	Range(ctx context.Context, key, token string, n int) (first, count int64, m Meta, err error)
	// IDs returns exactly n IDs of key; m.Strategy is the key's strategy.
	// text is true (and ids empty) when the key issues text IDs.
	IDs(ctx context.Context, key, token string, n int) (ids []int64, text bool, m Meta, err error)
	// Close releases the transport's connections.
	Close()
}

// Meta is what an answer says about the node that sent it and the key:
// the Idmint-Node, Idmint-Strategy, Idmint-Key-Generation and
// Idmint-Leader headers (gRPC: the same, lowercase, as header metadata).
// Fields are "" when absent.
type Meta struct {
	Node       string // the answering node's name
	Strategy   string // the key's strategy
	Generation string // opaque; changes when the key is built anew on that node
	Leader     string // the name of the node leading the key, as the answering node knows it
}

// A Dialer builds the Transport of one endpoint whose URL scheme it is
// registered for in Options.Dialers. It does not connect: New calls it
// for every endpoint before the first request.
type Dialer func(Target) (Transport, error)

// Target is the endpoint a Dialer builds a Transport for.
type Target struct {
	Endpoint string      // the URL as given to New
	URL      *url.URL    // Endpoint parsed; URL.Host is not empty
	TLS      *tls.Config // Options.TLS, nil when not set
}

// dialed adapts a Transport to the client's internal transport. It holds
// a Transport's answers to the rules the HTTP transport's are held to: a
// range of 1 to n IDs that does not pass the largest int64, exactly n IDs,
// or else a malformed answer (retryable: the endpoint backs off like one
// that failed). An empty answer taken as a success was asked again at
// once, in a loop, until the call's deadline.
type dialed struct {
	t   Transport
	url string
}

func metaOf(m Meta) meta {
	return meta{node: m.Node, strategy: m.Strategy, generation: m.Generation, leader: m.Leader}
}

func (d dialed) malformed(format string, args ...any) *Error {
	return &Error{Endpoint: d.url, Message: fmt.Sprintf(format, args...), Retryable: true, Err: errMalformed}
}

func (d dialed) rangeOf(ctx context.Context, key, token string, n int) (int64, int64, meta, error) {
	first, count, m, err := d.t.Range(ctx, key, token, n)
	if err == nil && (count < 1 || count > int64(n) || first > math.MaxInt64-(count-1)) {
		return 0, 0, metaOf(m), d.malformed("range answer: first %d, count %d for %d asked of key %q", first, count, n, key)
	}
	return first, count, metaOf(m), err
}

func (d dialed) ids(ctx context.Context, key, token string, n int) ([]int64, bool, meta, error) {
	ids, text, m, err := d.t.IDs(ctx, key, token, n)
	if err == nil && !text && len(ids) != n {
		return nil, false, metaOf(m), d.malformed("ids answer: %d IDs for %d asked of key %q", len(ids), n, key)
	}
	return ids, text, metaOf(m), err
}

func (d dialed) close() { d.t.Close() }

// grpcSchemes are the schemes package client/grpctransport dials: an
// endpoint of one without a Dialer gets an error that says where it is.
var grpcSchemes = map[string]bool{"grpc": true, "grpcs": true}

// newTransport builds the transport an endpoint URL names: http:// or
// https:// (HTTP, built in), or a scheme of opts.Dialers (grpc:// and
// grpcs:// with package client/grpctransport).
func newTransport(endpoint string, opts *Options) (transport, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("client: endpoint %q: want http://host:port, https://host:port, or grpc://host:port or grpcs://host:port with package client/grpctransport", endpoint)
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
	}
	if d := opts.Dialers[u.Scheme]; d != nil {
		t, err := d(Target{Endpoint: endpoint, URL: u, TLS: opts.TLS})
		if err != nil {
			return nil, err
		}
		return dialed{t: t, url: endpoint}, nil
	}
	if grpcSchemes[u.Scheme] {
		return nil, fmt.Errorf("client: endpoint %q: scheme %q needs the gRPC transport: set Options.Dialers to grpctransport.Dialers(grpctransport.Settings{}) (package github.com/idmint/idmint/client/grpctransport)", endpoint, u.Scheme)
	}
	want := "http or https"
	if len(opts.Dialers) > 0 {
		want = "http, https or one of Options.Dialers: " + strings.Join(slices.Sorted(maps.Keys(opts.Dialers)), ", ")
	}
	return nil, fmt.Errorf("client: endpoint %q: scheme %q: want %s", endpoint, u.Scheme, want)
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
	e.RetryAfter = answer.RetryAfter(resp.Header.Get("Retry-After"), time.Now)
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

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

var errMalformed = answer.ErrMalformed

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
