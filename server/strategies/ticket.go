package strategies

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/sqldb"
	"github.com/idmint/idmint/ticket"
)

// ticketStrategy serves Flickr-style ticket servers: one database round
// trip per ID (a PostgreSQL round trip may carry up to ticket.MaxBatch) from
// N MySQL/MariaDB or PostgreSQL servers whose counters step by N from
// distinct offsets.
func ticketStrategy() server.Strategy {
	return typed(server.Strategy{
		Name: "ticket",
		Summary: "Flickr ticket servers: auto-increment (MySQL/MariaDB REPLACE INTO Tickets64) or a sequence (PostgreSQL nextval) " +
			"on N servers stepping by N from distinct offsets, used round-robin, skipping a server that is down " +
			"(options: servers: comma-separated stores: names or database URLs, default the key's store; " +
			"step: N, default the number of servers; offsets: one per server, default 1..; table, sequence, stub, conns)",
	}, parseTicket, newTicket)
}

// ticketConfig is a ticket key's options resolved against the config.
type ticketConfig struct {
	cfg   ticket.Config
	shown []string // each server as a problem or a log may show it
}

// resolveEndpoint returns the URL an endpoint option names: the stores:
// entry of that name, or the value itself when no store has that name.
// fromStore says which.
func resolveEndpoint(cfg *server.Config, v string) (u string, fromStore bool) {
	if s, ok := cfg.Stores[v]; ok {
		return s, true
	}
	return v, false
}

// checkTicketURL accepts what ticket.Open can use: a MySQL/MariaDB or
// PostgreSQL URL, or a go-sql-driver DSN.
func checkTicketURL(u string) error {
	switch {
	case strings.HasPrefix(u, "mysql://"), strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return nil
	case strings.HasPrefix(u, "sqlite://"):
		return errors.New("a ticket server must be MySQL/MariaDB or PostgreSQL (SQLite serves one process: use a segment key)")
	case !strings.Contains(u, "://") && strings.Contains(u, "tcp("):
		return nil // go-sql-driver DSN: user:pass@tcp(host:3306)/db
	}
	return errors.New("not a stores: name nor a mysql://, postgres:// URL or user@tcp(host:port)/db DSN")
}

// parseTicket resolves and validates a ticket key's options. It returns
// every problem it finds, with field paths relative to the key.
func parseTicket(k server.KeyConfig, cfg *server.Config) (ticketConfig, []server.Problem) {
	ps := unknownOptions(k, "servers", "step", "offsets", "table", "sequence", "stub", "conns")
	add := func(field, value, format string, a ...any) {
		ps = append(ps, server.Problem{Field: field, Value: value, Message: fmt.Sprintf(format, a...)})
	}
	if k.Step != 0 {
		add("step", strconv.FormatInt(k.Step, 10), "ticket keys have no segment step; the servers' increment is options.step")
	}
	var tc ticketConfig
	var entries []string
	if v, ok := k.Options["servers"]; ok {
		for _, e := range strings.Split(v, ",") {
			entries = append(entries, strings.TrimSpace(e))
		}
	} else {
		entries = []string{k.Store}
	}
	seen := map[string]int{}
	for i, e := range entries {
		field := fmt.Sprintf("options.servers[%d]", i)
		if _, ok := k.Options["servers"]; !ok {
			field = "store"
		}
		if e == "" {
			add(field, "", "is empty")
			continue
		}
		u, fromStore := resolveEndpoint(cfg, e)
		shown := sqldb.Redact(u)
		if fromStore {
			shown = e + " (" + shown + ")"
		}
		if err := checkTicketURL(u); err != nil {
			add(field, shown, "%v", err)
		}
		if j, dup := seen[u]; dup {
			add(field, shown, "is also servers[%d]: one server has one counter", j)
		}
		seen[u] = i
		tc.cfg.Servers = append(tc.cfg.Servers, ticket.Server{URL: u})
		tc.shown = append(tc.shown, shown)
	}
	n := len(tc.cfg.Servers)
	step, p := intOption(k, "step", int64(n), int64(max(n, 1)), 65535)
	if p != nil {
		p.Message += fmt.Sprintf(" (at least the %d servers, so their residue classes stay disjoint; at most MySQL's 65535)", n)
		ps = append(ps, *p)
	}
	tc.cfg.Step = int(step)
	if v, ok := k.Options["offsets"]; ok {
		offs := strings.Split(v, ",")
		if len(offs) != n {
			add("options.offsets", v, "gives %d offsets for %d servers", len(offs), n)
		} else {
			used := map[int64]int{}
			for i, o := range offs {
				off, err := strconv.ParseInt(strings.TrimSpace(o), 10, 64)
				field := fmt.Sprintf("options.offsets[%d]", i)
				switch {
				case err != nil || off < 1 || off > step:
					add(field, o, "must be a whole number in 1..step (%d)", step)
					continue
				}
				if j, dup := used[off]; dup {
					add(field, o, "is also offsets[%d]: two servers would issue the same IDs", j)
				}
				used[off] = i
				tc.cfg.Servers[i].Offset = int(off)
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"table", &tc.cfg.Table}, {"sequence", &tc.cfg.Sequence}} {
		v, ok := k.Options[f.name]
		if !ok {
			continue
		}
		if !isSQLIdent(v) {
			add("options."+f.name, v, "is not a SQL identifier (a letter or underscore, then letters, digits, underscores; at most 63)")
		}
		*f.dst = v
	}
	if v, ok := k.Options["stub"]; ok {
		if len(v) != 1 || !isAlnum(v[0]) {
			add("options.stub", v, "must be one ASCII letter or digit")
		}
		tc.cfg.Stub = v
	}
	conns, p := intOption(k, "conns", ticket.DefaultConns, 1, 256)
	if p != nil {
		ps = append(ps, *p)
	}
	tc.cfg.Conns = int(conns)
	return tc, ps
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func isSQLIdent(s string) bool {
	if s == "" || len(s) > 63 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return false
		}
	}
	return true
}

func newTicket(ctx context.Context, env *server.Env, name string, k server.KeyConfig, tc ticketConfig) (server.Issuer, error) {
	tc.cfg.Clock = env.Clock
	w, err := openWitness(ctx, env)
	if err != nil {
		return nil, err
	}
	w.warnShared(env, name, strings.Join(tc.shown, ", "))
	tc.cfg.Witness, tc.cfg.Logger = w.w, env.Logger
	t, err := ticket.Open(ctx, tc.cfg)
	if err != nil {
		return nil, err
	}
	env.Logger.Info("ticket key ready", "key", name, "servers", strings.Join(tc.shown, ", "), "step", tc.cfg.Step, "ceiling", t.Ceiling())
	return &ticketKey{t: t, line: newRegionLine(env.Config, name)}, nil
}

// ticketKey serves one key from its own ticket.Ticket (its own pinned
// connections; keys on the same servers and table share the counter, which
// keeps them unique across each other too).
type ticketKey struct {
	t    *ticket.Ticket
	line regionLine // the region's share of the number line
}

// NextInt64s fills dst with one round trip per ID on MySQL, one per
// ticket.MaxBatch on PostgreSQL. IDs got before a failure are dropped:
// gaps, never repeats.
func (k *ticketKey) NextInt64s(ctx context.Context, dst []int64) error {
	for i := 0; i < len(dst); {
		n, err := k.t.NextN(ctx, dst[i:])
		if err != nil {
			return &retryable{err, time.Second}
		}
		i += n
	}
	return k.line.apply(dst)
}

// Ready fails while every server is backing off after failures; one server
// up is enough to serve (the others are skipped).
func (k *ticketKey) Ready(ctx context.Context) error {
	var errs []error
	for _, s := range k.t.Status() {
		if s.Up {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", s.URL, s.Err))
	}
	return fmt.Errorf("%w: %w", ticket.ErrUnavailable, errors.Join(errs...))
}

func (k *ticketKey) Stats() []server.Stat {
	st := k.t.Status()
	up := 0
	var back, swaps uint64
	var highest int64
	for _, s := range st {
		if s.Up {
			up++
		}
		back += s.WentBack
		swaps += s.IdentityChanges
		highest = max(highest, s.Max)
	}
	return append([]server.Stat{
		{Name: "ticket_servers", Help: "Ticket servers configured for a key.", Value: float64(len(st))},
		{Name: "ticket_servers_up", Help: "Ticket servers not backing off after a failure.", Value: float64(up)},
		{Name: "ticket_went_back_total", Help: "Times a ticket server answered below an ID it had given (a failover to a lagging replica, a restore) and was raised above the ceiling.",
			Value: float64(back), Counter: true},
		{Name: "ticket_server_changes_total", Help: "Times the database server behind a ticket server's URL changed identity (a failover or a restore).",
			Value: float64(swaps), Counter: true},
	}, k.line.runway(int64Ceiling, highest)...)
}

// Close closes the key's connections.
func (k *ticketKey) Close(ctx context.Context) error { return k.t.Close() }
