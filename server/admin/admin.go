// Package admin serves the key administration API, a surface beside the
// server's core: GET and POST /v1/keys (a page of keys; create one), GET,
// PATCH (step) and DELETE /v1/keys/{key}. Every route answers admin
// clients only (the admin token, or loopback without one). cmd/idmint adds
// it to every server it runs (server.Options.Surfaces: admin.New).
package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/internal/wire"
)

// surface is the admin API over one server.
type surface struct {
	s         *server.Server
	env       *server.Env
	keys, key *server.Route
}

// New builds the admin API's surface over s (a server.NewSurface).
func New(s *server.Server) server.Surface {
	return &surface{s: s, env: s.Env(), keys: s.Route("keys"), key: s.Route("key")}
}

// Routes adds the admin routes.
func (s *surface) Routes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/keys", s.s.Timed(s.keys, s.serveKeys))     // GET: a page of keys; POST: create one
	mux.HandleFunc("/v1/keys/{key}", s.s.Timed(s.key, s.serveKey)) // GET, PATCH (step), DELETE
}

// Hot serves nothing: administration has no ID route.
func (s *surface) Hot(http.ResponseWriter, *http.Request, string) bool { return false }

// serveKeys serves GET /v1/keys (list) and POST /v1/keys (create).
func (s *surface) serveKeys(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet, http.MethodPost) {
		return http.StatusMethodNotAllowed
	}
	if st := s.s.CheckAdmin(w, r); st != 0 {
		return st
	}
	if r.Method == http.MethodPost {
		return s.createKeyHTTP(w, r)
	}
	limit, after, err := parsePage(r.URL.RawQuery)
	if err != nil {
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadPage, Field: err.field, Message: err.Error()})
		return http.StatusBadRequest
	}
	t := s.s.Table()
	names := slices.Sorted(maps.Keys(t))
	from := sort.SearchStrings(names, after)
	if from < len(names) && names[from] == after && after != "" {
		from++
	}
	page := names[from:min(from+limit, len(names))]
	out := struct {
		Keys  []server.KeyView `json:"keys"`
		Total int              `json:"total"`
		Next  string           `json:"next,omitempty"`
	}{Keys: make([]server.KeyView, 0, len(page)), Total: len(names)}
	for _, n := range page {
		out.Keys = append(out.Keys, s.s.View(r, t[n]))
	}
	if from+len(page) < len(names) {
		out.Next = page[len(page)-1]
	}
	s.s.WriteJSON(w, http.StatusOK, out)
	return http.StatusOK
}

// DefaultKeysPage and MaxKeysPage bound GET /v1/keys: a page of keys in
// name order, ?limit=N (default DefaultKeysPage) after ?after=NAME; the
// answer's "next" is the after= of the next page, absent on the last.
// 10,000 keys listed at once made a 750 KB answer.
const (
	DefaultKeysPage = 1000
	MaxKeysPage     = 10000
)

type pageError struct {
	field string
	msg   string
}

func (e *pageError) Error() string { return e.msg }

func parsePage(raw string) (limit int, after string, perr *pageError) {
	limit = DefaultKeysPage
	v, ok, err := wire.QueryValue(raw, "limit")
	if err != nil {
		return 0, "", &pageError{"limit", err.Error()}
	}
	if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxKeysPage {
			return 0, "", &pageError{"limit", fmt.Sprintf("limit: %q is not a whole number between 1 and %d", wire.Trunc(v), MaxKeysPage)}
		}
		limit = n
	}
	a, _, err := wire.QueryValue(raw, "after")
	if err != nil {
		return 0, "", &pageError{"after", err.Error()}
	}
	return limit, a, nil
}

// createRequest is the body of POST /v1/keys.
type createRequest struct {
	Name string `json:"name"`
	server.KeyConfig
	Tokens []string `json:"tokens"`
}

// readBody decodes a JSON body of at most MaxBodyBytes into v, rejecting
// unknown fields and trailing data. It writes the error answer itself.
func (s *surface) readBody(w http.ResponseWriter, r *http.Request, v any) int {
	r.Body = http.MaxBytesReader(w, r.Body, s.env.Config.MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	if err == nil {
		return 0
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusRequestEntityTooLarge, Code: server.CodeBodyTooLarge, Field: "body", Message: fmt.Sprintf("body is larger than %d bytes (max_body_bytes)", mbe.Limit)})
		return http.StatusRequestEntityTooLarge
	}
	field, msg := bodyProblem(err)
	s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadBody, Field: field, Message: msg})
	return http.StatusBadRequest
}

// bodyProblem says what is wrong with a JSON body in the API's words,
// naming the field: encoding/json's own messages name Go types and struct
// fields ("cannot unmarshal string into Go struct field .step of type
// int64").
func bodyProblem(err error) (field, msg string) {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field = strings.TrimPrefix(ute.Field, "KeyConfig.")
		if field == "" {
			return "body", "the body is a JSON " + ute.Value + "; want an object"
		}
		return field, field + ": got a JSON " + ute.Value + ", want " + server.JSONWords.Kind(ute.Type)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return f, "unknown field " + strconv.Quote(f)
	}
	return "body", "the body is not a JSON object: " + strings.TrimPrefix(err.Error(), "json: ")
}

func (s *surface) createKeyHTTP(w http.ResponseWriter, r *http.Request) int {
	var req createRequest
	if st := s.readBody(w, r, &req); st != 0 {
		return st
	}
	req.KeyConfig.Tokens = req.Tokens
	k, err := s.s.CreateKey(r.Context(), req.Name, req.KeyConfig)
	var ve *server.ValidationError
	var ie *server.InputError
	switch {
	case errors.As(err, &ve):
		ps := ve.Problems
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		field := strings.TrimPrefix(ps[0].Field, ".")
		if field == "" {
			field = "name"
		}
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: "bad_" + strings.SplitN(strings.SplitN(field, "[", 2)[0], ".", 2)[0], Field: field, Message: strings.Join(msgs, "; ")})
		return http.StatusBadRequest
	case errors.As(err, &ie) && ie.Field == "name":
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadKey, Field: "name", Message: ie.Error()})
		return http.StatusBadRequest
	case errors.Is(err, server.ErrKeyExists):
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusConflict, Code: server.CodeConflict, Field: "name", Message: "key " + strconv.Quote(req.Name) + " exists"})
		return http.StatusConflict
	case errors.Is(err, server.ErrTooManyKeys):
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusTooManyRequests, Code: server.CodeRateLimited, Field: "max_keys", Message: err.Error() + ": delete keys, or raise max_keys in the config"})
		return http.StatusTooManyRequests
	case err != nil:
		return s.s.WriteIssuerError(w, err, req.Name)
	}
	v := s.s.View(r, k)
	w.Header().Set("Location", "/v1/keys/"+req.Name)
	s.s.WriteJSON(w, http.StatusCreated, v)
	return http.StatusCreated
}

// serveKey serves GET, PATCH (step) and DELETE /v1/keys/{key}.
func (s *surface) serveKey(w http.ResponseWriter, r *http.Request) int {
	if !s.s.MethodOK(w, r, http.MethodGet, http.MethodPatch, http.MethodDelete) {
		return http.StatusMethodNotAllowed
	}
	if st := s.s.CheckAdmin(w, r); st != 0 {
		return st
	}
	name := r.PathValue("key")
	if err := server.CheckName(name); err != nil {
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadKey, Field: "key", Message: err.Error()})
		return http.StatusBadRequest
	}
	notFound := func() int {
		s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusNotFound, Code: server.CodeUnknownKey, Field: "key", Message: "no key called " + strconv.Quote(name)})
		return http.StatusNotFound
	}
	switch r.Method {
	case http.MethodDelete:
		err := s.s.DeleteKey(r.Context(), name)
		switch {
		case errors.Is(err, server.ErrNoSuchKey):
			return notFound()
		case errors.Is(err, server.ErrConfigKey):
			s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusConflict, Code: server.CodeConflict, Field: "key", Message: "key " + strconv.Quote(name) + " is defined in the config file; remove it there"})
			return http.StatusConflict
		case err != nil:
			s.env.Logger.Warn("closing deleted key", "key", name, "err", err)
		}
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	case http.MethodPatch:
		var req struct {
			Step json.RawMessage `json:"step"` // read here, to name a bad value as it was sent
		}
		if st := s.readBody(w, r, &req); st != 0 {
			return st
		}
		step, perr := strconv.ParseInt(string(req.Step), 10, 64)
		if perr != nil || step < 1 || step > 1<<40 {
			v := "missing"
			if len(req.Step) > 0 {
				v = wire.Trunc(string(req.Step))
			}
			s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadStep, Field: "step", Message: "step: " + v + ": must be a whole number between 1 and 2^40"})
			return http.StatusBadRequest
		}
		k, err := s.s.SetStep(r.Context(), name, step)
		var ie *server.InputError
		switch {
		case errors.Is(err, server.ErrNoSuchKey):
			return notFound()
		case errors.Is(err, server.ErrNotStepped):
			s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeUnsupported, Field: "step", Message: "key " + strconv.Quote(name) + " has no step (its strategy does not lease blocks)"})
			return http.StatusBadRequest
		case errors.As(err, &ie):
			s.s.WriteError(w, server.ErrorAnswer{Status: http.StatusBadRequest, Code: server.CodeBadStep, Field: "step", Message: ie.Error()})
			return http.StatusBadRequest
		case err != nil:
			return s.s.WriteIssuerError(w, err, name)
		}
		s.s.WriteJSON(w, http.StatusOK, s.s.View(r, k))
		return http.StatusOK
	default:
		k := s.s.Lookup(name)
		if k == nil {
			return notFound()
		}
		s.s.WriteJSON(w, http.StatusOK, s.s.View(r, k))
		return http.StatusOK
	}
}
