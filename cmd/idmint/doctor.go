package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/idmint/idmint/doctor"
	"github.com/idmint/idmint/server"
	"github.com/idmint/idmint/server/strategies"
)

func init() {
	register(command{name: "doctor", summary: "check a deployment's configs (and with --connect its stores, coordinator and nodes) against what each guarantee assumes", run: runDoctor})
}

// Exit statuses of idmint doctor beside 0 (nothing at or above --fail-on),
// 1 (it could not run) and 2 (bad input).
const (
	doctorExitWarning = 3
	doctorExitError   = 4
)

// configList is a repeatable --config flag.
type configList []string

func (c *configList) String() string { return strings.Join(*c, ",") }
func (c *configList) Set(v string) error {
	if v == "" {
		return errors.New("empty file name")
	}
	*c = append(*c, v)
	return nil
}

func runDoctor(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "doctor", "[--config FILE [--config OTHER-SITE.yaml ...]] [--connect] [--nodes URL,URL] [--json] [--fail-on warning|error|never]")
	var configs configList
	fs.Var(&configs, "config", "a site's YAML config (env IDMINT_CONFIG; default the zero config); give one per site to compare them. With one, the environment (IDMINT_*) applies as it does for serve; with several, each file alone")
	connect := fs.Bool("connect", false, "also connect to the stores, coordinator and witness (5 s each): store below its witness's mark, clock offset from a SQL coordinator and from the nodes' recorded horizons, free worker IDs, a region's claims in its registry; reads only")
	nodes := fs.String("nodes", "", "comma-separated base URLs of running nodes (their admin listener when /metrics is there): health, readiness, build and keys compared")
	asJSON := fs.Bool("json", false, "print the report as one JSON document")
	failOn := fs.String("fail-on", "warning", "the least severity that makes the exit status non-zero: warning (3 for warnings, 4 for errors), error (4 for errors only) or never")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	threshold, never := doctor.Warning, false
	switch *failOn {
	case "warning":
	case "error":
		threshold = doctor.Error
	case "never":
		never = true
	default:
		return usagef("--fail-on: %q is not warning, error or never", *failOn)
	}
	var urls []string
	if *nodes != "" {
		for _, u := range strings.Split(*nodes, ",") {
			u = strings.TrimSpace(u)
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return usagef("--nodes: %q is not an http:// or https:// URL", u)
			}
			urls = append(urls, u)
		}
	}
	reg := server.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		return err
	}
	paths := []string(configs)
	if len(paths) == 0 {
		paths = []string{""}
	}
	var findings []doctor.Finding
	var sites []doctor.Site
	var checked doctor.Checked
	opts := doctor.Options{Nodes: len(urls)}
	for _, p := range paths {
		// Several sites are each checked as written: one environment
		// cannot be every site's.
		ce := *e
		if len(paths) > 1 {
			ce.getenv = func(string) string { return "" }
		}
		cfg, err := loadServeConfig(&ce, serveFlags{config: p}, reg)
		if err != nil {
			return err
		}
		name := siteName(paths, p, ce.getenv("IDMINT_CONFIG"))
		checked.Configs = append(checked.Configs, name)
		site := doctor.Site{Name: name, Config: cfg}
		if err := cfg.Validate(reg); err != nil {
			var ve *server.ValidationError
			if !errors.As(err, &ve) {
				return err
			}
			// The admin-token problem is the tokens.admin finding.
			var ps []server.Problem
			for _, pr := range ve.Problems {
				if !strings.Contains(pr.Message, "needs admin_token") {
					ps = append(ps, pr)
				}
			}
			shown := ""
			if len(paths) > 1 {
				shown = name
			}
			findings = append(findings, doctor.FromProblems(shown, ps)...)
			if len(paths) > 1 {
				for _, f := range doctor.Check(cfg, opts) {
					f.Site = name
					findings = append(findings, f)
				}
			} else {
				findings = append(findings, doctor.Check(cfg, opts)...)
			}
			continue // not compared with the other sites, not connected to
		}
		sites = append(sites, site)
	}
	findings = append(findings, doctor.CheckSites(sites, opts)...)
	if *connect {
		checked.Connect = true
		findings = append(findings, doctor.Connect(ctx, sites, doctor.ConnectOptions{Timeout: connectTimeout})...)
	}
	if len(urls) > 0 {
		checked.Nodes = urls
		token := ""
		if len(sites) > 0 {
			token = sites[0].Config.AdminToken
		}
		hc := &http.Client{Timeout: connectTimeout}
		findings = append(findings, doctor.Nodes(ctx, hc, urls, token)...)
	}
	rep := doctor.NewReport(checked, findings)
	if *asJSON {
		if err := writeIndentedJSON(e.stdout, rep); err != nil {
			return err
		}
	} else {
		printReport(e.stdout, rep)
	}
	worst, any := doctor.Worst(rep.Findings)
	switch {
	case never || !any || worst < threshold:
		return nil
	case worst == doctor.Error:
		return &exitStatus{doctorExitError}
	}
	return &exitStatus{doctorExitWarning}
}

// siteName is what findings call the config at path p: its file name, or
// the path as given when two of paths share a file name.
func siteName(paths []string, p, envConfig string) string {
	if p == "" {
		p = envConfig
	}
	if p == "" {
		return "(zero config)"
	}
	for _, q := range paths {
		if q != p && filepath.Base(q) == filepath.Base(p) {
			return p
		}
	}
	return filepath.Base(p)
}

// printReport writes the findings for people: one block each, most
// serious first, then a count.
func printReport(w io.Writer, r doctor.Report) {
	what := "checked " + strings.Join(r.Checked.Configs, ", ")
	if r.Checked.Connect {
		what += ", connected to its servers"
	} else {
		what += " (the files only; --connect opens the servers)"
	}
	if len(r.Checked.Nodes) > 0 {
		what += fmt.Sprintf(", asked %d node(s)", len(r.Checked.Nodes))
	}
	fmt.Fprintf(w, "idmint doctor: %s\n", what)
	for _, f := range r.Findings {
		head := strings.ToUpper(f.Severity.String()) + "  " + f.Check
		if f.Key != "" {
			head += "  key " + f.Key
		}
		if f.Site != "" {
			head += "  (" + f.Site + ")"
		}
		fmt.Fprintf(w, "\n%s\n  promise  %s\n  found    %s\n  fix      %s\n", head, f.Promise, f.Found, f.Fix)
	}
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "no findings: every check passed")
		return
	}
	fmt.Fprintf(w, "\n%d error(s), %d warning(s), %d info\n", r.Counts["error"], r.Counts["warning"], r.Counts["info"])
}
