package server

// Leaf-compatible endpoints. Behaviour follows Meituan-Dianping/Leaf's
// leaf-server (LeafController.java, LeafMonitorController.java,
// exception/LeafServerException.java, leaf-core common/Result.java):
//
//   - /api/segment/get/{key} and /api/snowflake/get/{key} answer 200 with
//     the bare decimal ID as text/plain. When the generator returns a
//     Result with status EXCEPTION, Leaf throws LeafServerException
//     (@ResponseStatus INTERNAL_SERVER_ERROR) with message
//     "Result{id=<code>, status=EXCEPTION}", which Spring Boot renders as a
//     500 JSON error body {timestamp,status,error,message,path}. The codes:
//     segment -1 cache not initialised, -2 key not exists, -3 both
//     segments empty (SegmentIDGenImpl); snowflake -1/-3 clock moved
//     backwards (SnowflakeIDGenImpl). idmint answers the same way: an
//     unknown segment key is 500 "Result{id=-2, status=EXCEPTION}" (not
//     404), an issuer refusal is 500 with -3 (segment) or -1 (snowflake).
//   - Leaf's snowflake endpoint ignores the key. idmint serves a
//     configured key of that name when there is one, and otherwise the key
//     named by leaf_snowflake_key.
//   - /decodeSnowflakeId?snowflakeId= answers a JSON map of strings
//     {"timestamp":"<ms>(yyyy-MM-dd HH:mm:ss.SSS)","workerId":..,
//     "sequenceId":..}, and {"errorMsg":...} (still 200) when the ID does
//     not parse as a Java long.
//   - Leaf's /cache and /db render HTML pages of SegmentBufferView and
//     LeafAlloc; idmint answers the same fields as JSON (CacheView,
//     StoreRow), to admin clients only.
//
// Leaf's @RequestMapping accepts every method; idmint accepts GET, HEAD
// and POST and answers 405 to the rest.

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Leaf's Result error ids.
const (
	leafInitFalse   = -1 // segment: cache not initialised; snowflake: clock still behind
	leafKeyNotFound = -2
	leafNoSegments  = -3 // segment: both buffers empty; snowflake: clock far behind
)

func (s *Server) leafSegment(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	st := s.serveLeaf(w, r, r.PathValue("key"), false)
	s.metrics.observe(routeLeafSegment, st, s.clk.Mono()-start)
}

func (s *Server) leafSnowflake(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	name := r.PathValue("key")
	if k := s.lookup(name); k == nil || k.ints == nil {
		if s.cfg.LeafSnowflakeKey != "" {
			name = s.cfg.LeafSnowflakeKey
		}
	}
	st := s.serveLeaf(w, r, name, true)
	s.metrics.observe(routeLeafSnowflake, st, s.clk.Mono()-start)
}

func (s *Server) serveLeaf(w http.ResponseWriter, r *http.Request, name string, snowflake bool) int {
	if !s.methodOK(w, r, http.MethodGet, http.MethodPost) {
		return http.StatusMethodNotAllowed
	}
	k := s.lookup(name)
	if k == nil || k.ints == nil {
		code := int64(leafKeyNotFound)
		if snowflake {
			code = leafInitFalse
		}
		s.leafError(w, r, code)
		return http.StatusInternalServerError
	}
	if st := authorize(r, k.tokens); st != 0 {
		s.writeAuthError(w, st)
		return st
	}
	if k.limiter != nil {
		if ok, wait := k.limiter.allow(); !ok {
			s.writeError(w, apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, field: "key", msg: "key " + strconv.Quote(name) + " is rate limited", retryAfter: wait})
			return http.StatusTooManyRequests
		}
	}
	var buf [1]int64
	k.mu.RLock()
	if k.gone {
		k.mu.RUnlock()
		s.leafError(w, r, leafKeyNotFound)
		return http.StatusInternalServerError
	}
	err := k.ints.NextInt64s(r.Context(), buf[:])
	k.mu.RUnlock()
	if err != nil {
		s.logRefusal(k, err)
		code := int64(leafNoSegments)
		if snowflake {
			code = leafInitFalse
		}
		s.leafError(w, r, code)
		return http.StatusInternalServerError
	}
	k.issued.Inc()
	var out [24]byte
	b := strconv.AppendInt(out[:0], buf[0], 10)
	h := w.Header()
	h["Content-Type"] = textType
	w.Write(b)
	return http.StatusOK
}

// leafError answers like Spring Boot's default error page for Leaf's
// LeafServerException.
func (s *Server) leafError(w http.ResponseWriter, r *http.Request, code int64) {
	body := struct {
		Timestamp int64  `json:"timestamp"`
		Status    int    `json:"status"`
		Error     string `json:"error"`
		Message   string `json:"message"`
		Path      string `json:"path"`
	}{s.clk.Now().UnixMilli(), 500, "Internal Server Error", "Result{id=" + strconv.FormatInt(code, 10) + ", status=EXCEPTION}", r.URL.Path}
	s.writeJSON(w, http.StatusInternalServerError, body)
}

// Twitter's layout, which Leaf's decodeSnowflakeId hard-codes: 41 bits of
// milliseconds since 1288834974657 (2010-11-04T01:42:54.657Z), 10 bits of
// worker, 12 of sequence (LeafMonitorController.decodeSnowflakeId).
const leafTwepoch = 1288834974657

func (s *Server) leafDecode(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	st := s.serveLeafDecode(w, r)
	s.metrics.observe(routeLeafDecode, st, s.clk.Mono()-start)
}

func (s *Server) serveLeafDecode(w http.ResponseWriter, r *http.Request) int {
	if !s.methodOK(w, r, http.MethodGet, http.MethodPost) {
		return http.StatusMethodNotAllowed
	}
	raw, ok, err := queryValue(r.URL.RawQuery, "snowflakeId")
	if err != nil || !ok {
		// Spring's MissingServletRequestParameterException: 400.
		body := map[string]any{"timestamp": s.clk.Now().UnixMilli(), "status": 400, "error": "Bad Request",
			"message": "Required String parameter 'snowflakeId' is not present", "path": r.URL.Path}
		s.writeJSON(w, http.StatusBadRequest, body)
		return http.StatusBadRequest
	}
	id, perr := parseLeafID(raw)
	if perr != nil {
		s.writeJSON(w, http.StatusOK, map[string]string{"errorMsg": "snowflake Id反解析发生异常!"})
		return http.StatusOK
	}
	var ms, worker, seq int64
	decoded := false
	if k := s.lookup(s.cfg.LeafSnowflakeKey); k != nil && k.dec != nil {
		if p, err := k.dec.Decode(strconv.FormatInt(id, 10)); err == nil && !p.Time.IsZero() {
			ms, worker, seq, decoded = p.Time.UnixMilli(), p.Node, p.Sequence, true
		}
	}
	if !decoded {
		ms = (id >> 22) + leafTwepoch
		worker = (id >> 12) & 0x3ff
		seq = id & 0xfff
	}
	ts := time.UnixMilli(ms).Format("2006-01-02 15:04:05.000")
	s.writeJSON(w, http.StatusOK, map[string]string{
		"timestamp":  strconv.FormatInt(ms, 10) + "(" + ts + ")",
		"workerId":   strconv.FormatInt(worker, 10),
		"sequenceId": strconv.FormatInt(seq, 10),
	})
	return http.StatusOK
}

// cache serves Leaf's /cache view: every key whose issuer is a Monitor.
func (s *Server) cache(w http.ResponseWriter, r *http.Request) {
	if !s.methodOK(w, r, http.MethodGet) {
		return
	}
	if st := s.adminAuth(r); st != 0 {
		s.writeAuthError(w, st)
		s.metrics.observe(routeCache, st, 0)
		return
	}
	out := map[string]CacheView{}
	for name, k := range s.table() {
		if m, ok := k.issuer.(Monitor); ok {
			out[name] = m.CacheView()
		}
	}
	s.writeJSON(w, http.StatusOK, out)
	s.metrics.observe(routeCache, http.StatusOK, 0)
}

// db serves Leaf's /db view: every Monitor key's store row.
func (s *Server) db(w http.ResponseWriter, r *http.Request) {
	if !s.methodOK(w, r, http.MethodGet) {
		return
	}
	if st := s.adminAuth(r); st != 0 {
		s.writeAuthError(w, st)
		s.metrics.observe(routeDB, st, 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	rows := []StoreRow{}
	for _, name := range sortedKeys(s.table()) {
		k := s.lookup(name)
		if m, ok := k.issuer.(Monitor); ok {
			row, err := m.StoreRow(ctx)
			if err != nil {
				s.writeError(w, issuerError(err, name))
				s.metrics.observe(routeDB, http.StatusServiceUnavailable, 0)
				return
			}
			rows = append(rows, row)
		}
	}
	s.writeJSON(w, http.StatusOK, rows)
	s.metrics.observe(routeDB, http.StatusOK, 0)
}
