package server

import (
	"context"
	"net/http"
	"time"
)

// A key's view, as the admin API and the dashboard show it: part of the
// core both surfaces read, so neither depends on the other.

// KeyView is a key as the admin API and the dashboard show it (never its
// tokens).
type KeyView struct {
	Name      string            `json:"name"`
	Strategy  string            `json:"strategy"`
	Store     string            `json:"store,omitempty"`
	Layout    string            `json:"layout,omitempty"`
	Step      int64             `json:"step,omitempty"`
	RateLimit float64           `json:"rate_limit,omitempty"`
	Options   map[string]string `json:"options,omitempty"`
	Auth      bool              `json:"auth"`
	Source    string            `json:"source"` // "config" or "api"
	Ready     bool              `json:"ready"`
	Ranges    bool              `json:"ranges"`
	Cache     *CacheView        `json:"cache,omitempty"`
}

// viewReadyTimeout bounds the store round trip behind a view's "ready".
const viewReadyTimeout = 2 * time.Second

// View builds k's view. It holds no lock: the table is an immutable
// snapshot, and Ready may be a store round trip.
func (s *Server) View(r *http.Request, k *Key) KeyView {
	v := KeyView{Name: k.name, Strategy: k.cfg.Strategy, Store: k.cfg.Store, Layout: k.cfg.Layout,
		Step: k.step.Load(), RateLimit: k.cfg.RateLimit, Options: redactOptions(k.cfg.Options),
		Auth: len(k.tokens) > 0, Source: "api", Ready: true, Ranges: k.ranger != nil}
	if k.fromConfig {
		v.Source = "config"
	}
	if st, ok := k.issuer.(Stepper); ok {
		v.Step = st.Step()
	}
	if rd, ok := k.issuer.(Readier); ok {
		ctx, cancel := context.WithTimeout(r.Context(), viewReadyTimeout)
		v.Ready = rd.Ready(ctx) == nil
		cancel()
	}
	if m, ok := k.issuer.(Monitor); ok {
		c := m.CacheView()
		v.Cache = &c
	}
	return v
}

// secretOptions are option names whose values are key material or
// credentials: the admin views show that they are set, never their value.
var secretOptions = map[string]bool{"key": true, "secret": true, "password": true, "token": true}

func redactOptions(o map[string]string) map[string]string {
	if o == nil {
		return nil
	}
	out := make(map[string]string, len(o))
	for n, v := range o {
		if secretOptions[n] {
			v = "(redacted)"
		}
		out[n] = v
	}
	return out
}
