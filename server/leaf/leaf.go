// Package leaf serves Meituan Leaf's HTTP API over a server's keys, so a
// Leaf client (or a script written for leaf-server) talks to idmint
// unchanged. cmd/idmint adds it to every server it runs:
//
//	server.New(ctx, server.Options{..., Surfaces: []server.NewSurface{leaf.New}})
//
// Leaf-compatible endpoints. Behaviour follows Meituan-Dianping/Leaf's
// leaf-server 1.0.1 on Spring Boot 1.5.18 (leaf-server/pom.xml):
// controller/LeafController.java, controller/LeafMonitorController.java,
// exception/LeafServerException.java, service/SegmentService.java,
// service/SnowflakeService.java, templates/segment.ftl and db.ftl, and
// leaf-core's common/Result.java, segment/SegmentIDGenImpl.java and
// snowflake/SnowflakeIDGenImpl.java.
//
//   - /api/segment/get/{key} and /api/snowflake/get/{key} answer 200 with
//     the bare decimal ID as text/plain;charset=UTF-8 (a String returned
//     by a @RestController, written by Spring Boot's StringHttpMessage
//     Converter in UTF-8). When the generator's Result has status
//     EXCEPTION, LeafController throws LeafServerException, annotated
//     @ResponseStatus(INTERNAL_SERVER_ERROR), with Result.toString() as
//     its message; Spring Boot 1.5's BasicErrorController renders it as
//     500 application/json;charset=UTF-8
//     {"timestamp":<ms>,"status":500,"error":"Internal Server Error",
//     "exception":"com.sankuai.inf.leaf.server.exception.LeafServerException",
//     "message":"Result{id=<code>, status=EXCEPTION}","path":<path>}
//     (DefaultErrorAttributes: timestamp, status, error, exception,
//     message, path, in that order), or as its "Whitelabel Error Page"
//     (text/html) to a client whose Accept names text/html.
//   - Segment codes (SegmentIDGenImpl): -1 the tag cache is not loaded yet,
//     -2 no such tag, -3 both buffers empty (the store failed or the tag's
//     row went away). Snowflake codes (SnowflakeIDGenImpl.get): -3 the
//     clock is more than 5 ms behind the last ID, -1 it is still behind
//     after waiting; idmint also answers -1 whenever its snowflake key
//     cannot issue (lease fenced, no snowflake key configured).
//   - Leaf's snowflake endpoint ignores the key (SnowflakeIDGenImpl.get
//     never reads it); idmint always serves the key named by
//     leaf_snowflake_key there.
//   - Leaf's SegmentIDGenImpl serves every biz_tag of leaf_alloc and
//     reloads the list every 60 s (updateCacheFromDbAtEveryMinute,
//     updateCacheFromDb). idmint serves every row of the default store
//     that is not a configured key the same way (leafTags below).
//   - /decodeSnowflakeId?snowflakeId= answers a JSON map of strings
//     {"timestamp":"<ms>(yyyy-MM-dd HH:mm:ss.SSS)","workerId":..,
//     "sequenceId":..}, and {"errorMsg":...} (still 200) when the ID does
//     not parse as a Java long; without the parameter Spring answers 400
//     with MissingServletRequestParameterException.
//   - /cache and /db render LeafMonitorController's FreeMarker pages
//     (segment.ftl, db.ftl) to clients whose Accept names text/html, and
//     the same fields as JSON otherwise; to admin clients only.
//   - Spring MVC 4.3 matches a trailing slash (useTrailingSlashMatch) and
//     Leaf's @RequestMapping names no method. idmint serves every Leaf
//     route with and without the trailing slash: the ID routes and
//     /decodeSnowflakeId for GET, HEAD and POST, /cache and /db for GET
//     and HEAD, and answers 405 to the rest.
package leaf

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idmint/idmint/internal/numfmt"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/wire"
	"github.com/idmint/idmint/snowflake"
)

// Leaf's Result error ids.
const (
	leafInitFalse   = -1 // segment: tag cache not loaded; snowflake: clock still behind
	leafKeyNotFound = -2
	leafNoSegments  = -3 // segment: both buffers empty; snowflake: clock far behind
)

// Exception class names Spring Boot 1.5 puts in an error body's
// "exception" field.
const (
	leafServerException   = "com.sankuai.inf.leaf.server.exception.LeafServerException"
	springMissingParamExc = "org.springframework.web.bind.MissingServletRequestParameterException"
)

// leafJSONType is what Spring 4.3's MappingJackson2HttpMessageConverter
// writes JSON as.
var (
	leafJSONType = []string{"application/json;charset=UTF-8"}
	leafHTMLType = []string{"text/html;charset=UTF-8"}
)

// surface is Leaf's API over one server.
type surface struct {
	s   *server.Server
	env *server.Env

	segment, snowflake, decode, cache, db *server.Route

	// snowflakes names the config's snowflake keys when there are several
	// and leaf_snowflake_key names none of them: the snowflake route then
	// cannot know which to serve.
	snowflakes []string
}

// New builds Leaf's surface over s (a server.NewSurface).
func New(s *server.Server) server.Surface {
	sf := &surface{s: s, env: s.Env(),
		segment: s.Route("leaf_segment"), snowflake: s.Route("leaf_snowflake"), decode: s.Route("leaf_decode"),
		cache: s.Route("cache"), db: s.Route("db")}
	if ns := server.SnowflakeKeys(sf.env.Config.Keys); sf.env.Config.LeafSnowflakeKey == "" && len(ns) > 1 {
		sf.snowflakes = ns
		sf.env.Logger.Warn("Leaf's /api/snowflake/get/{tag} answers 404: there are several snowflake keys and leaf_snowflake_key names none of them; set it to the key Leaf's route serves",
			"snowflake_keys", ns)
	}
	return sf
}

// Routes registers the Leaf-compatible routes, each also with a trailing
// slash as Spring MVC matches it.
func (s *surface) Routes(mux *http.ServeMux) {
	for _, r := range []struct {
		path string
		h    http.HandlerFunc
	}{
		{"/api/segment/get/{key}", s.leafSegment},
		{"/api/snowflake/get/{key}", s.leafSnowflake},
		{"/decodeSnowflakeId", s.s.Timed(s.decode, s.serveLeafDecode)},
		{"/cache", s.cacheView},
		{"/db", s.dbView},
	} {
		mux.HandleFunc(r.path, r.h)
		mux.HandleFunc(r.path+"/{$}", r.h)
	}
}

// Prefixes of the Leaf routes Hot serves.
const (
	leafSegmentPrefix   = "/api/segment/get/"
	leafSnowflakePrefix = "/api/snowflake/get/"
)

// Hot serves the Leaf ID routes without the mux: a key segment, with or
// without Spring's trailing slash, and no other '/'. It reports whether it
// served r.
func (s *surface) Hot(w http.ResponseWriter, r *http.Request, p string) bool {
	switch {
	case strings.HasPrefix(p, leafSegmentPrefix):
		if key, ok := lastSegment(p[len(leafSegmentPrefix):]); ok {
			s.leafSegmentOf(w, r, key)
			return true
		}
	case strings.HasPrefix(p, leafSnowflakePrefix):
		if _, ok := lastSegment(p[len(leafSnowflakePrefix):]); ok {
			s.leafSnowflake(w, r) // Leaf ignores the key here
			return true
		}
	}
	return false
}

// lastSegment is the key of "KEY" or "KEY/" (the Leaf routes' trailing
// slash), when it is not empty and holds no other '/'.
func lastSegment(rest string) (string, bool) {
	rest = strings.TrimSuffix(rest, "/")
	return rest, rest != "" && !strings.Contains(rest, "/")
}

func (s *surface) leafSegment(w http.ResponseWriter, r *http.Request) {
	s.leafSegmentOf(w, r, r.PathValue("key"))
}

func (s *surface) leafSegmentOf(w http.ResponseWriter, r *http.Request, name string) {
	start := s.env.Clock.Mono()
	st := s.serveLeafSegment(w, r, name)
	s.segment.Observe(st, s.env.Clock.Mono()-start)
}

func (s *surface) serveLeafSegment(w http.ResponseWriter, r *http.Request, name string) int {
	if !s.s.MethodOK(w, r, http.MethodGet, http.MethodPost) {
		return http.StatusMethodNotAllowed
	}
	k := s.s.Lookup(name)
	if k == nil || k.Int64s() == nil {
		// Not configured: a tag of the default store's table, as Leaf
		// serves every biz_tag of leaf_alloc.
		var code int64
		k, code = s.leafTag(r.Context(), name)
		if k == nil {
			return s.leafError(w, r, code)
		}
		// A row a key deleted through the admin API left behind is
		// still that key's: its tokens apply.
		if st := s.s.AuthorizeRetired(r, name); st != 0 {
			s.s.WriteAuthError(w, st)
			return st
		}
	}
	return s.serveLeaf(w, r, k, false)
}

func (s *surface) leafSnowflake(w http.ResponseWriter, r *http.Request) {
	start := s.env.Clock.Mono()
	st := s.serveLeafSnowflake(w, r)
	s.snowflake.Observe(st, s.env.Clock.Mono()-start)
}

func (s *surface) serveLeafSnowflake(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet, http.MethodPost) {
		return http.StatusMethodNotAllowed
	}
	// Leaf ignores {key} here: every key gets the one snowflake generator.
	if s.snowflakes != nil {
		return s.springError(w, r, http.StatusNotFound, "", "this server has several snowflake keys ("+strings.Join(s.snowflakes, ", ")+
			") and leaf_snowflake_key names none of them: ask for one by name on /v1/snowflake/{key}, or set leaf_snowflake_key")
	}
	k := s.s.Lookup(s.env.Config.LeafSnowflakeKey)
	if s.env.Config.LeafSnowflakeKey == "" || k == nil || k.Int64s() == nil {
		return s.leafError(w, r, leafInitFalse)
	}
	return s.serveLeaf(w, r, k, true)
}

func (s *surface) serveLeaf(w http.ResponseWriter, r *http.Request, k *server.Key, snow bool) int {
	if st := k.Authorize(r); st != 0 {
		// Tokens are idmint's: a client that sends one knows idmint's
		// error body.
		s.s.WriteAuthError(w, st)
		return st
	}
	if ok, wait := k.Allow(); !ok {
		// Leaf has no rate limit; the answer is shaped as Spring's
		// errors are, so a Leaf client finds its status and message.
		secs := int64((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		return s.springError(w, r, http.StatusTooManyRequests, "", "key "+strconv.Quote(k.Name())+" is rate limited")
	}
	var buf [1]int64
	if !k.Hold() {
		return s.leafError(w, r, leafKeyNotFound)
	}
	if r.Method == http.MethodHead {
		// HEAD answers what GET would (status, type) after the same
		// checks, without consuming an ID.
		k.Release()
		w.Header()["Content-Type"] = wire.TextPlain
		return http.StatusOK
	}
	err := k.Int64s().NextInt64s(r.Context(), buf[:])
	k.Release()
	if err != nil {
		s.s.LogRefusal(r.Context(), k, err)
		return s.leafError(w, r, leafCode(err, snow))
	}
	k.Issued(1)
	var out [24]byte
	b := strconv.AppendInt(out[:0], buf[0], 10)
	w.Header()["Content-Type"] = wire.TextPlain
	w.Write(b)
	return http.StatusOK
}

// leafCode is the Result id Leaf answers in the state err describes.
func leafCode(err error, snow bool) int64 {
	if !snow {
		return leafNoSegments
	}
	if errors.Is(err, snowflake.ErrClockBehind) {
		// A rollback idmint could not wait out is longer than Leaf's 5 ms.
		return leafNoSegments
	}
	return leafInitFalse
}

// leafError answers like Spring Boot 1.5 does for Leaf's
// LeafServerException.
func (s *surface) leafError(w http.ResponseWriter, r *http.Request, code int64) int {
	return s.springError(w, r, http.StatusInternalServerError, leafServerException,
		"Result{id="+strconv.FormatInt(code, 10)+", status=EXCEPTION}")
}

// springError writes Spring Boot 1.5's error answer: its Whitelabel Error
// Page to a client asking for HTML, otherwise DefaultErrorAttributes as
// JSON (exception only when an exception caused it). It returns status.
func (s *surface) springError(w http.ResponseWriter, r *http.Request, status int, exception, message string) int {
	now := s.env.Clock.Now()
	h := w.Header()
	h["Cache-Control"] = wire.NoStore
	h.Set("X-Content-Type-Options", "nosniff")
	if wantsHTML(r) {
		// ErrorMvcAutoConfiguration's SpelView; the time is Java's
		// Date.toString().
		h["Content-Type"] = leafHTMLType
		w.WriteHeader(status)
		w.Write([]byte("<html><body><h1>Whitelabel Error Page</h1><p>This application has no explicit mapping for /error, so you are seeing this as a fallback.</p><div id='created'>" +
			now.Format("Mon Jan 02 15:04:05 MST 2006") + "</div><div>There was an unexpected error (type=" + html.EscapeString(http.StatusText(status)) +
			", status=" + strconv.Itoa(status) + ").</div><div>" + html.EscapeString(message) + "</div></body></html>"))
		return status
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"timestamp":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"error":`...)
	b = wire.AppendJSONString(b, http.StatusText(status))
	if exception != "" {
		b = append(b, `,"exception":`...)
		b = wire.AppendJSONString(b, exception)
	}
	b = append(b, `,"message":`...)
	b = wire.AppendJSONString(b, message)
	b = append(b, `,"path":`...)
	b = wire.AppendJSONString(b, r.URL.Path)
	b = append(b, "}\n"...)
	h["Content-Type"] = leafJSONType
	w.WriteHeader(status)
	w.Write(b)
	return status
}

// wantsHTML reports whether r's Accept header names text/html with a
// non-zero quality: the requests Spring Boot's BasicErrorController.errorHtml
// (produces text/html) answers, and the ones /cache and /db render HTML for.
func wantsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(mt), "text/html") {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				if n, val, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(n, "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
						q = f
					}
				}
			}
			if q > 0 {
				return true
			}
		}
	}
	return false
}

// Twitter's layout, which Leaf's decodeSnowflakeId hard-codes: 41 bits of
// milliseconds since 1288834974657 (2010-11-04T01:42:54.657Z), 10 bits of
// worker, 12 of sequence (LeafMonitorController.decodeSnowflakeId).
const leafTwepoch = 1288834974657

func (s *surface) serveLeafDecode(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet, http.MethodPost) {
		return http.StatusMethodNotAllowed
	}
	raw, ok, err := wire.QueryValue(r.URL.RawQuery, "snowflakeId")
	if err != nil || !ok {
		// DefaultHandlerExceptionResolver: 400 with the exception's message.
		return s.springError(w, r, http.StatusBadRequest, springMissingParamExc, "Required String parameter 'snowflakeId' is not present")
	}
	// Java's Long.parseLong: an optional sign and decimal digits, within
	// int64.
	id, perr := strconv.ParseInt(raw, 10, 64)
	if perr != nil {
		return s.leafJSON(w, r, map[string]string{"errorMsg": "snowflake Id反解析发生异常!"})
	}
	var ms, worker, seq int64
	decoded := false
	k := s.s.Lookup(s.env.Config.LeafSnowflakeKey)
	if k != nil {
		// The key's layout (its epoch, its bit widths) is the key's to
		// show: its tokens apply here as on /v1/decode and gRPC Decode.
		if st := k.Authorize(r); st != 0 {
			s.s.WriteAuthError(w, st)
			return st
		}
	}
	if k != nil && k.Decoder() != nil {
		if p, err := k.Decoder().Decode(strconv.FormatInt(id, 10)); err == nil && !p.Time.IsZero() {
			ms, worker, seq, decoded = p.Time.UnixMilli(), p.Node, p.Sequence, true
		}
	}
	if !decoded {
		ms = (id >> 22) + leafTwepoch
		worker = (id >> 12) & 0x3ff
		seq = id & 0xfff
	}
	ts := time.UnixMilli(ms).Format("2006-01-02 15:04:05.000")
	return s.leafJSON(w, r, map[string]string{
		"timestamp":  strconv.FormatInt(ms, 10) + "(" + ts + ")",
		"workerId":   strconv.FormatInt(worker, 10),
		"sequenceId": strconv.FormatInt(seq, 10),
	})
}

// leafJSON answers 200 with v as JSON, as Spring writes a @ResponseBody.
func (s *surface) leafJSON(w http.ResponseWriter, r *http.Request, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return s.springError(w, r, http.StatusInternalServerError, "", "encode answer: "+err.Error())
	}
	h := w.Header()
	h["Content-Type"] = leafJSONType
	h["Cache-Control"] = wire.NoStore
	w.Write(append(b, '\n'))
	return http.StatusOK
}

// cacheView serves Leaf's /cache view: the buffers of every configured key
// whose issuer is a Monitor and of every tag of the default store's table
// (Leaf lists every tag it has loaded from leaf_alloc, loaded or not:
// initOk false and zeros until its first request).
func (s *surface) cacheView(w http.ResponseWriter, r *http.Request) {
	st := s.serveCache(w, r)
	s.cache.Observe(st, 0)
}

func (s *surface) serveCache(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet) {
		return http.StatusMethodNotAllowed
	}
	if st := s.s.CheckAdmin(w, r); st != 0 {
		return st
	}
	out := map[string]server.CacheView{}
	if t := s.leafTracker(); t != nil {
		t.ready(r.Context())
		for name, k := range t.table() {
			if m, ok := k.Issuer().(server.Monitor); ok {
				out[name] = m.CacheView()
			}
		}
	}
	for name, k := range s.s.Table() {
		if m, ok := k.Issuer().(server.Monitor); ok {
			out[name] = m.CacheView()
		}
	}
	if !wantsHTML(r) {
		return s.leafJSON(w, r, out)
	}
	// segment.ftl: one row per tag, FreeMarker's default number format.
	var b strings.Builder
	b.WriteString(leafPageHead)
	b.WriteString("<thead>\n<tr><th>name</th><th>init</th><th>next</th><th>pos</th><th>value0</th><th>max0</th><th>step0</th><th>value1</th><th>max1</th><th>step1</th></tr>\n</thead>\n<tbody>\n")
	for _, name := range slices.Sorted(maps.Keys(out)) {
		v := out[name]
		b.WriteString("<tr>")
		cell(&b, html.EscapeString(name))
		cell(&b, strconv.FormatBool(v.InitOk))
		cell(&b, strconv.FormatBool(v.NextReady))
		for _, n := range []int64{int64(v.Pos), v.Value0, v.Max0, v.Step0, v.Value1, v.Max1, v.Step1} {
			// Grouped as FreeMarker's default number format does in the
			// en_US and zh_CN locales ("1,234,567"): Leaf's pages print
			// ${item.maxId} without ?c.
			cell(&b, numfmt.Group(n))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString(leafPageTail)
	return s.leafHTML(w, b.String())
}

// dbView serves Leaf's /db view: every row of the default store's table
// (LeafMonitorController.getDb lists leaf_alloc), and the store rows of
// configured keys kept elsewhere.
func (s *surface) dbView(w http.ResponseWriter, r *http.Request) {
	st := s.serveDB(w, r)
	s.db.Observe(st, 0)
}

func (s *surface) serveDB(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet) {
		return http.StatusMethodNotAllowed
	}
	if st := s.s.CheckAdmin(w, r); st != 0 {
		return st
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	byKey := map[string]server.StoreRow{}
	if t := s.leafTracker(); t != nil {
		rows, err := t.rows(ctx)
		if err != nil {
			s.s.WriteIssuerError(w, err, "leaf_alloc")
			return http.StatusServiceUnavailable
		}
		for _, row := range rows {
			// Order-number sequences stay off the page: their max_id
			// is the order volume (design.md U10).
			if leafServable(row.Key) {
				byKey[row.Key] = row
			}
		}
	}
	t := s.s.Table()
	for _, name := range slices.Sorted(maps.Keys(t)) {
		if m, ok := t[name].Issuer().(server.Monitor); ok {
			row, err := m.StoreRow(ctx)
			if err != nil {
				s.s.WriteIssuerError(w, err, name)
				return http.StatusServiceUnavailable
			}
			byKey[row.Key] = row
		}
	}
	rows := make([]server.StoreRow, 0, len(byKey))
	for _, name := range slices.Sorted(maps.Keys(byKey)) {
		rows = append(rows, byKey[name])
	}
	if !wantsHTML(r) {
		return s.leafJSON(w, r, rows)
	}
	// db.ftl: tag, max, step, update (LeafAlloc.updateTime, the column as
	// the MySQL driver's getString renders it).
	var b strings.Builder
	b.WriteString(leafPageHead)
	b.WriteString("<thead>\n<tr><th>tag</th><th>max</th><th>step</th><th>update</th></tr>\n</thead>\n<tbody>\n")
	for _, row := range rows {
		b.WriteString("<tr>")
		cell(&b, html.EscapeString(row.Key))
		cell(&b, numfmt.Group(row.MaxID))
		cell(&b, numfmt.Group(row.Step))
		upd := ""
		if !row.UpdateTime.IsZero() {
			upd = row.UpdateTime.Local().Format("2006-01-02 15:04:05")
		}
		cell(&b, upd)
		b.WriteString("</tr>\n")
	}
	b.WriteString(leafPageTail)
	return s.leafHTML(w, b.String())
}

// The frame of Leaf's two FreeMarker pages.
const (
	leafPageHead = "<!DOCTYPE html PUBLIC \"-//W3C//DTD HTML 4.01 Transitional//EN\" \"http://www.w3.org/TR/html4/loose.dtd\">\n<html>\n<head>\n" +
		"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\">\n<title>Leaf</title>\n" +
		"<link href=\"/css/bootstrap.min.css\" rel=\"stylesheet\">\n</head>\n<body>\n<table class=\"table table-hover\">\n"
	leafPageTail = "</tbody>\n</table>\n</body>\n</html>\n"
)

func cell(b *strings.Builder, text string) {
	b.WriteString("<td>")
	b.WriteString(text)
	b.WriteString("</td>")
}

// leafHTML answers 200 with a page, as Spring's FreeMarkerView does
// (spring.freemarker.content-type text/html, charset UTF-8).
func (s *surface) leafHTML(w http.ResponseWriter, page string) int {
	h := w.Header()
	h["Content-Type"] = leafHTMLType
	h["Cache-Control"] = wire.NoStore
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write([]byte(page))
	return http.StatusOK
}

// leafReloadEvery is how often the default store's tags are listed again:
// Leaf's updateCacheFromDbAtEveryMinute schedules updateCacheFromDb with a
// fixed delay of 60 s.
const leafReloadEvery = 60 * time.Second

// leafRetryMin is the first pause after a failed listing; it doubles up to
// leafReloadEvery.
const leafRetryMin = time.Second

// leafDayRow matches the rows of order-number keys' daily sequences
// (ordernum.SequenceKey: NAME:YYYYMMDD). They are never served as tags:
// their numbers would publish how many orders a day saw (design.md U10).
var leafDayRow = regexp.MustCompile(`:[0-9]{8}$`)

// leafServable reports whether a row of the default store may be served as
// a Leaf tag: its name is a valid key name (rows with "/", such as
// ordernum.SequenceRow's, are idmint's own) and not an order-number day
// sequence.
func leafServable(tag string) bool {
	return server.CheckName(tag) == nil && !leafDayRow.MatchString(tag)
}

// leafTags serves the default store's rows that no key is configured for,
// as Leaf serves every biz_tag of leaf_alloc: it lists the table when
// first asked, then every leafReloadEvery, adding new rows and dropping
// rows that went away. It is a Resource of the server's Env, closed with
// the server.
type leafTags struct {
	s      *surface
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	first  chan struct{} // closed after the first listing attempt

	tbl    atomic.Pointer[leafTableRef]
	tags   atomic.Pointer[map[string]*server.Key]
	loaded atomic.Bool // a listing has succeeded
}

type leafTableRef struct{ t server.LeafTable }

// leafTracker returns the server's leafTags, starting it on first use; nil
// when no "segment" strategy is registered or the server is closed.
func (s *surface) leafTracker() *leafTags {
	if s.s.Closed() {
		return nil
	}
	if _, ok := s.env.Registry.Strategy("segment"); !ok {
		return nil
	}
	res, err := s.env.Shared(context.Background(), "leaf tags", func(context.Context) (server.Resource, error) {
		t := &leafTags{s: s, done: make(chan struct{}), first: make(chan struct{})}
		t.ctx, t.cancel = context.WithCancel(context.Background())
		empty := map[string]*server.Key{}
		t.tags.Store(&empty)
		go t.run()
		return t, nil
	})
	if err != nil {
		return nil
	}
	return res.(*leafTags)
}

// leafTag returns the table's key called name, or nil and the Result id
// Leaf answers: -1 while the table was never listed, -2 when it has no
// such servable row.
func (s *surface) leafTag(ctx context.Context, name string) (*server.Key, int64) {
	t := s.leafTracker()
	if t == nil {
		return nil, leafKeyNotFound
	}
	if !t.ready(ctx) {
		return nil, leafInitFalse
	}
	if k := t.table()[name]; k != nil {
		return k, 0
	}
	return nil, leafKeyNotFound
}

// ready waits for the first listing attempt (or ctx) and reports whether
// a listing has succeeded.
func (t *leafTags) ready(ctx context.Context) bool {
	if t.loaded.Load() {
		return true
	}
	select {
	case <-t.first:
	case <-ctx.Done():
	case <-t.done:
	}
	return t.loaded.Load()
}

func (t *leafTags) table() map[string]*server.Key { return *t.tags.Load() }

// rows lists the table (for /db).
func (t *leafTags) rows(ctx context.Context) ([]server.StoreRow, error) {
	tbl, err := t.open(ctx)
	if err != nil {
		return nil, err
	}
	return tbl.Rows(ctx)
}

// open returns the default store's LeafTable, building it the first time.
func (t *leafTags) open(ctx context.Context) (server.LeafTable, error) {
	if ref := t.tbl.Load(); ref != nil {
		return ref.t, nil
	}
	st, ok := t.s.env.Registry.Strategy("segment")
	if !ok {
		return nil, errors.New("server: no segment strategy registered")
	}
	iss, err := st.New(ctx, t.s.env, "", server.KeyConfig{Strategy: "segment", Store: server.DefaultStore, Options: map[string]string{server.LeafTableOption: "true"}})
	if err != nil {
		return nil, err
	}
	tbl, ok := iss.(server.LeafTable)
	if !ok {
		iss.Close(ctx)
		return nil, errors.New("server: the segment strategy does not serve whole tables")
	}
	if !t.tbl.CompareAndSwap(nil, &leafTableRef{tbl}) {
		tbl.Close(ctx)
		return t.tbl.Load().t, nil
	}
	return tbl, nil
}

func (t *leafTags) run() {
	defer close(t.done)
	var once sync.Once
	wait := leafRetryMin
	for {
		err := t.reload()
		once.Do(func() { close(t.first) })
		pause := leafReloadEvery
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			t.s.env.Logger.Warn("leaf tags: cannot list the default store's table; retrying", "err", err, "retry_in", wait.String())
			pause, wait = wait, min(wait*2, leafReloadEvery)
		} else {
			wait = leafRetryMin
		}
		if t.s.env.Clock.Sleep(t.ctx, pause) != nil {
			return
		}
	}
}

// reload lists the table and swaps in the new set of tags; keys of rows
// still present are kept (their buffers too), keys of rows that went away
// are closed after their last request.
func (t *leafTags) reload() error {
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	tbl, err := t.open(ctx)
	if err != nil {
		return err
	}
	rows, err := tbl.Rows(ctx)
	if err != nil {
		return err
	}
	old := t.table()
	if len(rows) == 0 && len(old) > 0 {
		// updateCacheFromDb keeps its cache when the table reads empty.
		t.loaded.Store(true)
		return nil
	}
	next := make(map[string]*server.Key, len(rows))
	for _, row := range rows {
		if !leafServable(row.Key) {
			continue
		}
		if k := old[row.Key]; k != nil {
			next[row.Key] = k
			continue
		}
		iss, err := tbl.Open(row.Key)
		if err != nil {
			t.s.env.Logger.Warn("leaf tags: cannot serve a row of the default store", "tag", row.Key, "err", err)
			continue
		}
		k, err := t.s.s.Adopt(ctx, row.Key, server.KeyConfig{Strategy: "segment", Store: server.DefaultStore}, iss)
		if err != nil {
			t.s.env.Logger.Warn("leaf tags: cannot serve a row of the default store", "tag", row.Key, "err", err)
			continue
		}
		if k.Int64s() == nil {
			k.Retire(ctx)
			continue
		}
		next[row.Key] = k
	}
	t.tags.Store(&next)
	t.loaded.Store(true)
	for name, k := range old {
		if next[name] != k {
			t.s.env.Logger.Info("leaf tags: row gone from the default store; no longer served", "tag", name)
			k.Retire(ctx)
		}
	}
	return nil
}

// Close stops the reloading and closes every tag's issuer and the table.
func (t *leafTags) Close(ctx context.Context) error {
	t.cancel()
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, k := range t.table() {
		k.Retire(ctx)
	}
	if ref := t.tbl.Load(); ref != nil {
		return ref.t.Close(ctx)
	}
	return nil
}
