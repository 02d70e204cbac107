package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/idmint/idmint/clock"
)

// Strategy describes one way of minting IDs and how to build an issuer for
// a key configured with it.
type Strategy struct {
	// Name is what a key's `strategy:` field says ("snowflake", "segment").
	Name string
	// Summary is one line for listings.
	Summary string
	// Check validates the strategy-specific fields of a key's config and
	// returns every problem; Field paths are relative to the key
	// ("step", "options.alphabet"). May be nil.
	Check func(key KeyConfig, cfg *Config) []Problem
	// New builds the issuer for the key called name. It may share
	// expensive resources (a database, a worker lease) with other keys
	// through env.Shared.
	New func(ctx context.Context, env *Env, name string, key KeyConfig) (Issuer, error)
	// Prepare, when set, is called once as the server starts, before New,
	// with every key of the strategy that start builds: it may do for all
	// of them at once what New would do one by one (create their store
	// rows in one batch). May be nil.
	Prepare func(ctx context.Context, env *Env, keys map[string]KeyConfig) error
	// MaxName is the longest key name (bytes) the strategy can serve,
	// when shorter than MaxNameLen (a name it derives store rows from
	// must leave room). 0: MaxNameLen.
	MaxName int
}

// Layout decodes IDs of one named bit layout or format for /v1/decode.
type Layout struct {
	Name   string
	Decode func(id string) (Decoded, error)
}

// LayoutBuilder turns a layout described in the config into a Layout.
type LayoutBuilder func(name, spec string) (Layout, error)

// Registry maps strategy names to their factories and layout names to their
// decoders. It is safe for concurrent use; registration normally happens
// once, before New.
type Registry struct {
	mu         sync.RWMutex
	strategies map[string]Strategy
	layouts    map[string]Layout
	builder    LayoutBuilder
	start      []func(ctx context.Context, env *Env) error
}

// ErrRegistered is returned by Register and RegisterLayout when the name is
// already taken.
var ErrRegistered = errors.New("server: name already registered")

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{strategies: map[string]Strategy{}, layouts: map[string]Layout{}}
}

// Register adds a strategy. It fails when the name is empty, New is nil, or
// the name is taken.
func (r *Registry) Register(s Strategy) error {
	if s.Name == "" || s.New == nil {
		return fmt.Errorf("server: strategy %q: name and New are required", s.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.strategies[s.Name]; ok {
		return fmt.Errorf("%w: strategy %q", ErrRegistered, s.Name)
	}
	r.strategies[s.Name] = s
	return nil
}

// RegisterLayout adds a named decoder for /v1/decode.
func (r *Registry) RegisterLayout(l Layout) error {
	if l.Name == "" || l.Decode == nil {
		return fmt.Errorf("server: layout %q: name and Decode are required", l.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.layouts[l.Name]; ok {
		return fmt.Errorf("%w: layout %q", ErrRegistered, l.Name)
	}
	r.layouts[l.Name] = l
	return nil
}

// SetLayoutBuilder sets how layouts described in a config's `layouts:`
// section are built (and validated).
func (r *Registry) SetLayoutBuilder(b LayoutBuilder) {
	r.mu.Lock()
	r.builder = b
	r.mu.Unlock()
}

// OnStart adds a check New runs once the config is valid and before any
// key is built (the region's identity against what its coordinator
// records): an error refuses the start.
func (r *Registry) OnStart(check func(ctx context.Context, env *Env) error) {
	r.mu.Lock()
	r.start = append(r.start, check)
	r.mu.Unlock()
}

func (r *Registry) startChecks() []func(ctx context.Context, env *Env) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]func(ctx context.Context, env *Env) error(nil), r.start...)
}

// Strategy returns the strategy called name.
func (r *Registry) Strategy(name string) (Strategy, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.strategies[name]
	return s, ok
}

// Layout returns the built-in layout called name.
func (r *Registry) Layout(name string) (Layout, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	l, ok := r.layouts[name]
	return l, ok
}

func (r *Registry) layoutBuilder() LayoutBuilder {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.builder
}

// Strategies returns the registered strategy names, sorted.
func (r *Registry) Strategies() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.strategies))
	for n := range r.strategies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Layouts returns the registered layout names, sorted.
func (r *Registry) Layouts() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.layouts))
	for n := range r.layouts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resource is something several issuers share (a database handle, a worker
// lease). It may also implement Readier and StatsReporter.
type Resource interface {
	Close(ctx context.Context) error
}

// Env is what a strategy factory may use: the clock, a logger, the whole
// config (stores, coordinator, layouts) and shared resources.
type Env struct {
	Clock    clock.Clock
	Logger   *slog.Logger
	Config   *Config
	Registry *Registry
	// NodeName names this node (Options.NodeName), as its answers do.
	NodeName string

	mu    sync.Mutex
	res   map[string]Resource
	order []string
}

// Shared returns the resource called name, opening it with open the first
// time it is asked for. Resources are closed in reverse order of opening,
// after every issuer, when the server closes. A failed open is not cached.
func (e *Env) Shared(ctx context.Context, name string, open func(ctx context.Context) (Resource, error)) (Resource, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.res[name]; ok {
		return r, nil
	}
	r, err := open(ctx)
	if err != nil {
		return nil, err
	}
	if e.res == nil {
		e.res = map[string]Resource{}
	}
	e.res[name] = r
	e.order = append(e.order, name)
	return r, nil
}

// LookupLayout resolves a layout name: one from the config's `layouts:`
// section first, then a registered one.
func (e *Env) LookupLayout(name string) (Layout, error) {
	return lookupLayout(e.Registry, e.Config, name)
}

func lookupLayout(reg *Registry, cfg *Config, name string) (Layout, error) {
	if cfg != nil {
		if spec, ok := cfg.Layouts[name]; ok {
			b := reg.layoutBuilder()
			if b == nil {
				return Layout{}, fmt.Errorf("server: layout %q: no layout builder registered", name)
			}
			return b(name, spec)
		}
	}
	if l, ok := reg.Layout(name); ok {
		return l, nil
	}
	return Layout{}, fmt.Errorf("unknown layout %q; built-in layouts: %s; or define it under layouts:", name, strings.Join(reg.Layouts(), ", "))
}

// Resources lists the shared resources opened so far, in the order they
// were opened.
func (e *Env) Resources() []NamedResource {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]NamedResource, 0, len(e.order))
	for _, n := range e.order {
		out = append(out, NamedResource{n, e.res[n]})
	}
	return out
}

// NamedResource is a shared resource and the name it was opened under.
type NamedResource struct {
	Name     string
	Resource Resource
}

func (e *Env) closeAll(ctx context.Context) error {
	rs := e.Resources()
	var errs []error
	for i := len(rs) - 1; i >= 0; i-- {
		if err := rs[i].Resource.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", rs[i].Name, err))
		}
	}
	return errors.Join(errs...)
}
