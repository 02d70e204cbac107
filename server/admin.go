package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/idmint/idmint/server/internal/wire"
)

// keysCollection serves GET /v1/keys (list) and POST /v1/keys (create).
func (s *Server) keysCollection(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	st := s.serveKeys(w, r)
	s.metrics.observe(routeKeys, st, s.clk.Mono()-start)
}

func (s *Server) serveKeys(w http.ResponseWriter, r *http.Request) int {
	if !s.methodOK(w, r, http.MethodGet, http.MethodPost) {
		return http.StatusMethodNotAllowed
	}
	if e := s.adminCheck(r); e != nil {
		s.writeError(w, *e)
		return e.status
	}
	if r.Method == http.MethodPost {
		return s.createKeyHTTP(w, r)
	}
	limit, after, err := parsePage(r.URL.RawQuery)
	if err != nil {
		e := apiError{status: http.StatusBadRequest, code: CodeBadPage, field: err.field, msg: err.Error()}
		s.writeError(w, e)
		return e.status
	}
	t := s.table()
	names := sortedKeys(t)
	from := sort.SearchStrings(names, after)
	if from < len(names) && names[from] == after && after != "" {
		from++
	}
	page := names[from:min(from+limit, len(names))]
	out := struct {
		Keys  []KeyView `json:"keys"`
		Total int       `json:"total"`
		Next  string    `json:"next,omitempty"`
	}{Keys: make([]KeyView, 0, len(page)), Total: len(names)}
	for _, n := range page {
		out.Keys = append(out.Keys, s.View(r, t[n]))
	}
	if from+len(page) < len(names) {
		out.Next = page[len(page)-1]
	}
	s.writeJSON(w, http.StatusOK, out)
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
	KeyConfig
	Tokens []string `json:"tokens"`
}

// readBody decodes a JSON body of at most MaxBodyBytes into v, rejecting
// unknown fields and trailing data. It writes the error answer itself.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) int {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
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
		s.writeError(w, apiError{status: http.StatusRequestEntityTooLarge, code: CodeBodyTooLarge, field: "body", msg: fmt.Sprintf("body is larger than %d bytes (max_body_bytes)", mbe.Limit)})
		return http.StatusRequestEntityTooLarge
	}
	field := "body"
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) && ute.Field != "" {
		field = strings.TrimPrefix(ute.Field, "KeyConfig.")
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		field = strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
	}
	s.writeError(w, apiError{status: http.StatusBadRequest, code: CodeBadBody, field: field, msg: "bad JSON body: " + err.Error()})
	return http.StatusBadRequest
}

func (s *Server) createKeyHTTP(w http.ResponseWriter, r *http.Request) int {
	var req createRequest
	if st := s.readBody(w, r, &req); st != 0 {
		return st
	}
	req.KeyConfig.Tokens = req.Tokens
	req.KeyConfig.api = true
	if err := CheckName(req.Name); err != nil {
		s.writeError(w, apiError{status: http.StatusBadRequest, code: CodeBadKey, field: "name", msg: err.Error()})
		return http.StatusBadRequest
	}
	if req.Store == "" {
		req.Store = DefaultStore
	}
	if ps := s.cfg.checkKey(s.reg, "", req.Name, req.KeyConfig); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		field := strings.TrimPrefix(ps[0].Field, ".")
		if field == "" {
			field = "name"
		}
		s.writeError(w, apiError{status: http.StatusBadRequest, code: "bad_" + strings.SplitN(strings.SplitN(field, "[", 2)[0], ".", 2)[0], field: field, msg: strings.Join(msgs, "; ")})
		return http.StatusBadRequest
	}
	k, err := s.createKey(r.Context(), req.Name, req.KeyConfig)
	switch {
	case errors.Is(err, errKeyExists):
		s.writeError(w, apiError{status: http.StatusConflict, code: CodeConflict, field: "name", msg: "key " + strconv.Quote(req.Name) + " exists"})
		return http.StatusConflict
	case errors.Is(err, errTooManyKeys):
		s.writeError(w, apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, field: "max_keys",
			msg: err.Error() + ": delete keys, or raise max_keys in the config"})
		return http.StatusTooManyRequests
	case err != nil:
		e := issuerError(err, req.Name)
		s.writeError(w, e)
		return e.status
	}
	v := s.View(r, k)
	w.Header().Set("Location", "/v1/keys/"+req.Name)
	s.writeJSON(w, http.StatusCreated, v)
	return http.StatusCreated
}

// keyResource serves GET, PATCH (step) and DELETE /v1/keys/{key}.
func (s *Server) keyResource(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Mono()
	st := s.serveKey(w, r)
	s.metrics.observe(routeKey, st, s.clk.Mono()-start)
}

func (s *Server) serveKey(w http.ResponseWriter, r *http.Request) int {
	if !s.methodOK(w, r, http.MethodGet, http.MethodPatch, http.MethodDelete) {
		return http.StatusMethodNotAllowed
	}
	if e := s.adminCheck(r); e != nil {
		s.writeError(w, *e)
		return e.status
	}
	name := r.PathValue("key")
	if err := CheckName(name); err != nil {
		s.writeError(w, apiError{status: http.StatusBadRequest, code: CodeBadKey, field: "key", msg: err.Error()})
		return http.StatusBadRequest
	}
	notFound := func() int {
		s.writeError(w, apiError{status: http.StatusNotFound, code: CodeUnknownKey, field: "key", msg: "no key called " + strconv.Quote(name)})
		return http.StatusNotFound
	}
	switch r.Method {
	case http.MethodDelete:
		err := s.deleteKey(r.Context(), name)
		switch {
		case errors.Is(err, errNoSuchKey):
			return notFound()
		case errors.Is(err, errConfigKey):
			s.writeError(w, apiError{status: http.StatusConflict, code: CodeConflict, field: "key", msg: "key " + strconv.Quote(name) + " is defined in the config file; remove it there"})
			return http.StatusConflict
		case err != nil:
			s.log.Warn("closing deleted key", "key", name, "err", err)
		}
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	case http.MethodPatch:
		var req struct {
			Step *int64 `json:"step"`
		}
		if st := s.readBody(w, r, &req); st != 0 {
			return st
		}
		if req.Step == nil || *req.Step < 1 || *req.Step > 1<<40 {
			v := "missing"
			if req.Step != nil {
				v = strconv.FormatInt(*req.Step, 10)
			}
			s.writeError(w, apiError{status: http.StatusBadRequest, code: CodeBadStep, field: "step", msg: "step: " + v + ": must be a whole number between 1 and 2^40"})
			return http.StatusBadRequest
		}
		k, err := s.setStep(r.Context(), name, *req.Step)
		switch {
		case errors.Is(err, errNoSuchKey):
			return notFound()
		case errors.Is(err, errNotStepped):
			s.writeError(w, apiError{status: http.StatusBadRequest, code: CodeUnsupported, field: "step", msg: "key " + strconv.Quote(name) + " has no step (its strategy does not lease blocks)"})
			return http.StatusBadRequest
		case err != nil:
			e := issuerError(err, name)
			var ie *InputError
			if errors.As(err, &ie) {
				e.code, e.field = CodeBadStep, "step"
			}
			s.writeError(w, e)
			return e.status
		}
		v := s.View(r, k)
		s.writeJSON(w, http.StatusOK, v)
		return http.StatusOK
	default:
		k := s.lookup(name)
		var v KeyView
		if k != nil {
			v = s.View(r, k)
		}
		if k == nil {
			return notFound()
		}
		s.writeJSON(w, http.StatusOK, v)
		return http.StatusOK
	}
}
