// Package doctor checks a deployment against what each of idmint's
// guarantees assumes: a Finding names the check, how serious it is, the
// promise it threatens ("IDs of key order may repeat after ..."), what was
// found and the fix.
//
// Check and CheckSites read configurations only (cheap, no I/O): `idmint
// serve` runs Check at start and exports the result as a metric, and
// `idmint doctor` prints it. Connect adds the checks that need the live
// stores, coordinator, witness and nodes.
package doctor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/idmint/idmint/server"
)

// Severity is how serious a finding is.
type Severity int

// Severities, least serious first.
const (
	// Info: worth knowing; nothing is at risk.
	Info Severity = iota
	// Warning: a promise holds only as long as an operator avoids an
	// action (restoring a backup, adding a node) or a condition stays away.
	Warning
	// Error: a promise does not hold in this deployment as it stands, or
	// holds only until an ordinary event (a failover, a restart).
	Error
)

var severityNames = [...]string{"info", "warning", "error"}

// String returns "info", "warning" or "error".
func (s Severity) String() string {
	if s < Info || s > Error {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// MarshalText writes the severity's name (the JSON form).
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity's name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSeverity reads "info", "warning" or "error".
func ParseSeverity(s string) (Severity, error) {
	for i, n := range severityNames {
		if s == n {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("doctor: severity %q is not info, warning or error", s)
}

// Finding is one thing a check found.
type Finding struct {
	// Check names the check ("witness.missing"); stable across releases,
	// so alerts and CI may match on it.
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Site is the configuration the finding is about (its file name), ""
	// when only one was checked or the finding is about a live node.
	Site string `json:"site,omitempty"`
	// Key is the key concerned, "" when the finding is about the node.
	Key string `json:"key,omitempty"`
	// Promise is the guarantee at risk, in words.
	Promise string `json:"promise"`
	// Found is what the check saw.
	Found string `json:"found"`
	// Fix is what to change.
	Fix string `json:"fix"`
}

// Report is the machine-readable document `idmint doctor --json` prints.
// Its fields only ever grow.
type Report struct {
	// Format is the document's version, 1.
	Format int `json:"format"`
	// Checked says what was checked: config files, whether the live
	// stores were connected to, which nodes were asked.
	Checked  Checked   `json:"checked"`
	Findings []Finding `json:"findings"`
	// Counts is the number of findings by severity name.
	Counts map[string]int `json:"counts"`
	// Worst is the severity of the most serious finding; "" when none.
	Worst string `json:"worst"`
}

// Checked lists what a report covers.
type Checked struct {
	Configs []string `json:"configs"`
	Connect bool     `json:"connect"`
	Nodes   []string `json:"nodes"`
}

// NewReport sorts the findings and counts them.
func NewReport(c Checked, fs []Finding) Report {
	fs = append([]Finding{}, fs...)
	Sort(fs)
	r := Report{Format: 1, Checked: c, Findings: fs, Counts: map[string]int{"error": 0, "warning": 0, "info": 0}}
	if r.Checked.Configs == nil {
		r.Checked.Configs = []string{}
	}
	if r.Checked.Nodes == nil {
		r.Checked.Nodes = []string{}
	}
	for _, f := range fs {
		r.Counts[f.Severity.String()]++
	}
	if w, ok := Worst(fs); ok {
		r.Worst = w.String()
	}
	return r
}

// Sort orders findings most serious first, then by check, site and key.
func Sort(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(b.Severity, a.Severity), cmp.Compare(a.Check, b.Check),
			cmp.Compare(a.Site, b.Site), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Found, b.Found))
	})
}

// Worst returns the most serious severity among fs; false when fs is empty.
func Worst(fs []Finding) (Severity, bool) {
	if len(fs) == 0 {
		return Info, false
	}
	w := Info
	for _, f := range fs {
		w = max(w, f.Severity)
	}
	return w, true
}

// Counts sums findings by check and severity: what a node exports as
// idmint_doctor_findings{check,severity}.
func Counts(fs []Finding) []server.StartFinding {
	n := map[server.StartFinding]int{}
	var order []server.StartFinding
	for _, f := range fs {
		k := server.StartFinding{Check: f.Check, Severity: f.Severity.String()}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	out := make([]server.StartFinding, 0, len(order))
	for _, k := range order {
		k.Count = n[k]
		out = append(out, k)
	}
	return out
}

// Options are what the cheap checks assume about the deployment.
type Options struct {
	// Now is the time layout runway is measured from. Zero: time.Now().
	Now time.Time
	// Nodes is how many nodes are expected to serve the keys (the
	// number of --nodes given); 0 when unknown.
	Nodes int
}

func (o Options) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

// Thresholds of the runway checks.
const (
	// LayoutErrorWithin: a layout ending sooner is an error.
	LayoutErrorWithin = 90 * 24 * time.Hour
	// LayoutWarnWithin: a layout ending sooner is a warning.
	LayoutWarnWithin = 365 * 24 * time.Hour
	// SmallPool: with an unknown number of nodes, a cluster coordinator's
	// pool of fewer worker IDs than this is a warning.
	SmallPool = 8
)

// FromProblems turns a configuration's validation problems into findings
// of check config.invalid: a node refuses to start with any of them.
func FromProblems(site string, ps []server.Problem) []Finding {
	out := make([]Finding, 0, len(ps))
	for _, p := range ps {
		out = append(out, Finding{Check: "config.invalid", Severity: Error, Site: site,
			Promise: "a node with this configuration does not start (it refuses it with this problem)",
			Found:   p.String(), Fix: "correct the field as the message says (`idmint serve --check --config FILE` lists every problem)"})
	}
	return out
}

// shownList names up to n of names, with how many more there are.
func shownList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// Log writes each finding once: errors at level error, warnings at warn,
// the rest at info.
func Log(log *slog.Logger, fs []Finding) {
	for _, f := range fs {
		lv := slog.LevelInfo
		switch f.Severity {
		case Error:
			lv = slog.LevelError
		case Warning:
			lv = slog.LevelWarn
		}
		attrs := []any{"check", f.Check}
		if f.Key != "" {
			attrs = append(attrs, "key", f.Key)
		}
		attrs = append(attrs, "found", f.Found, "fix", f.Fix)
		log.Log(context.Background(), lv, "doctor: "+f.Promise, attrs...)
	}
}
