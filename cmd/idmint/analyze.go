package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/idmint/idmint/analyze"
	"github.com/idmint/idmint/idformat"
	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/snowflake"
)

func init() {
	register(command{name: "analyze", summary: "find duplicates, disorder, mod-N skew and patterns in a list of IDs: idmint analyze [FILE|-] [--json] [--html FILE]", run: runAnalyze})
}

func runAnalyze(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "analyze", "[FILE|-] [--layout NAME|SPEC] [--format NAME] [--random] [--details] [--json] [--html FILE] [--check]\n\n"+
		"Reads IDs, one per line (blank lines and # comments are skipped), from FILE or standard input, and\n"+
		"prints the verdict and its findings; --details adds the statistics behind them. On a terminal,\n"+
		"standard error shows how many lines have been read.")
	layoutText := fs.String("layout", "", "snowflake layout of decimal IDs (see `idmint layouts`); default: guessed from the IDs")
	format := fs.String("format", "", "the IDs' format: snowflake, integer, ordernum, "+strings.Join(idformat.Formats(), ", ")+"; default: guessed")
	orderFormat := fs.String("order-format", defaultOrderFormat, "order-number format spec, with --format ordernum")
	random := fs.Bool("random", false, "the IDs are meant to be unguessable (opaque IDs): report any pattern in consecutive values as a defect")
	details := fs.Bool("details", false, "print the statistics behind the verdict: format, duplicates, order overall and per worker, time, mod N, end date, randomness")
	asJSON := fs.Bool("json", false, "print the report as JSON (everything --details shows)")
	htmlOut := fs.String("html", "", "also write an HTML report with SVG charts to this file")
	modSample := fs.Int("mod-sample", 1<<18, "count at most this many IDs (a fixed-seed sample) in the mod-N test; 0 skips it")
	check := fs.Bool("check", false, "exit with status 1 when the report has a defect or a warning")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("too many arguments %q: give one FILE or - for standard input", pos)
	}
	opt := analyze.Options{Format: *format, Random: *random, Now: time.Now()}
	switch {
	case *modSample < 0:
		return usagef("flag --mod-sample: %d must not be negative", *modSample)
	case *modSample == 0:
		opt.ModSample = -1
	default:
		opt.ModSample = *modSample
	}
	if *layoutText != "" {
		if opt.Layout, err = snowflake.ParseLayout(*layoutText); err != nil {
			return usagef("flag --layout: %v", err)
		}
		if opt.Format == "" {
			opt.Format = analyze.Snowflake
		}
	}
	if opt.Format == analyze.OrderNum {
		if opt.OrderFormat, err = ordernum.ParseFormat(*orderFormat); err != nil {
			return usagef("flag --order-format: %v", err)
		}
	}
	in := e.stdin
	if len(pos) == 1 && pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return usagef("argument FILE: %v", err)
		}
		defer f.Close()
		in = f
	}
	if isTerminal(e.stderr) {
		opt.Progress = progressLine(e.stderr)
	}
	rep, err := analyze.Read(in, opt)
	if opt.Progress != nil {
		fmt.Fprint(e.stderr, "\r\033[K") // the progress line is done
	}
	switch {
	case errors.Is(err, analyze.ErrOptions):
		return usagef("%v", err)
	case errors.Is(err, analyze.ErrNoIDs), errors.Is(err, analyze.ErrFormat):
		return usagef("%v (name it with --format or --layout)", err)
	case err != nil:
		return err
	}
	if *asJSON {
		if err := writeIndentedJSON(e.stdout, rep); err != nil {
			return err
		}
	} else {
		writeVerdict(e.stdout, rep)
		if *details {
			fmt.Fprintln(e.stdout)
			writeAnalysisText(e.stdout, rep)
		} else {
			fmt.Fprintln(e.stdout, "\nThe statistics behind this verdict: idmint analyze --details.")
		}
	}
	if *htmlOut != "" {
		if err := writeFileAtomic(*htmlOut, func(w io.Writer) error { return writeAnalysisHTML(w, rep) }); err != nil {
			return fmt.Errorf("write --html %s: %w", *htmlOut, err)
		}
	}
	if *check && !rep.Clean() {
		return errors.New("the report has defects or warnings (--check)")
	}
	return nil
}

// writeFileAtomic writes a temporary file beside path and renames it.
func writeFileAtomic(path string, fill func(io.Writer) error) error {
	f, err := os.CreateTemp(dirOf(path), ".idmint-analyze-*.html")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o644); err != nil { // a report to share, like any file the shell writes
		f.Close()
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}

// progressLine returns an analyze.Options.Progress that redraws one line
// on w: how many input lines have been read.
func progressLine(w io.Writer) func(lines int) {
	return func(lines int) { fmt.Fprintf(w, "\ridmint analyze: %d lines read", lines) }
}

// writeVerdict prints the verdict in plain words, then every finding,
// worst first.
func writeVerdict(w io.Writer, r *analyze.Report) {
	var defects, warnings int
	for _, f := range r.Findings {
		switch f.Severity {
		case analyze.Defect:
			defects++
		case analyze.Warning:
			warnings++
		}
	}
	what := r.Format
	if r.LayoutName != "" {
		what += ", layout " + r.LayoutName
	}
	if r.Guessed {
		what += " (guessed; --details says how)"
	}
	ids := countOf(r.Count, "ID", "IDs")
	switch {
	case defects > 0:
		fmt.Fprintf(w, "NOT clean: %s", countOf(defects, "defect", "defects"))
		if warnings > 0 {
			fmt.Fprintf(w, " and %s", countOf(warnings, "warning", "warnings"))
		}
		fmt.Fprintf(w, " in %s of %s\n", ids, what)
	case warnings > 0:
		fmt.Fprintf(w, "NOT clean: no defect, but %s in %s of %s\n", countOf(warnings, "warning", "warnings"), ids, what)
	default:
		fmt.Fprintf(w, "clean: no defect and no warning in %s of %s\n", ids, what)
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "  %-8s %-10s %s\n", f.Severity, f.Kind, f.Message)
	}
}

// countOf is n and the noun, singular when n is 1.
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// writeAnalysisText prints the statistics behind the verdict.
func writeAnalysisText(w io.Writer, r *analyze.Report) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	format := r.Format
	if r.LayoutName != "" {
		format += "/" + r.LayoutName
	}
	p("format      %s", format)
	if r.Layout != "" {
		p("layout      %s", r.Layout)
	}
	if r.Guessed {
		p("            guessed: %s", r.GuessNote)
	}
	p("ids         %d (%s, %s)", r.Count, countOf(r.Lines, "line", "lines"), countOf(r.Invalid.Count, "not an ID", "not IDs"))
	d := r.Duplicates
	p("duplicates  %s of %s (%s)", countOf(d.Extra, "extra copy", "extra copies"), countOf(d.Values, "value", "values"), countOf(d.Distinct, "distinct ID", "distinct IDs"))
	for _, x := range d.Examples {
		p("            %s x%d on lines %s", x.ID, x.Times, joinLines(x.Lines))
	}
	o := r.Order
	p("order       overall: %s", orderLine(o.Overall))
	if o.Workers > 0 {
		p("            per worker (%s): %s", countOf(o.Workers, "worker", "workers"), orderLine(o.Worst))
		for i, wo := range o.PerWorker {
			if i == 5 || (wo.Descents == 0 && i > 0) {
				break
			}
			p("              %-24s %s, peak %d per tick", wo.Worker, orderLine(wo.OrderStats), wo.PeakPerTick)
		}
	}
	if t := r.Time; t != nil {
		p("time        %s .. %s (%s)", t.First.Format(stampFormat), t.Last.Format(stampFormat), t.Span.Round(time.Millisecond))
		capacity := ""
		if t.CapacityPerTick > 0 {
			capacity = fmt.Sprintf(" (a worker may issue %d)", t.CapacityPerTick)
		}
		p("            %.1f IDs/s; peak %s in one tick of %v at %s%s", t.RatePerSecond, countOf(t.PeakPerTick, "ID", "IDs"), t.Tick, t.PeakAt.Format(stampFormat), capacity)
	}
	if m := r.Mod; m != nil {
		sample := "all IDs"
		if m.Sampled {
			sample = fmt.Sprintf("a sample of %d IDs", m.Sample)
		}
		verdict := "balanced"
		if m.Skewed {
			verdict = fmt.Sprintf("SKEWED for %d of %d Ns", m.SkewedNs, analyze.MaxMod-1)
		}
		p("mod N       N = 2..%d over %s: %s", analyze.MaxMod, sample, verdict)
		p("            worst N = %d: chi-square %.1f (df %d, p = %.3g), fullest residue %.2fx its share, %d empty", m.Worst.N, m.Worst.Chi2, m.Worst.N-1, m.Worst.P, m.Worst.MaxShare, m.Worst.Empty)
	}
	if e := r.End; e != nil {
		left := fmt.Sprintf("%.1f years left", e.YearsLeft)
		if e.Expired {
			left = "EXPIRED"
		}
		p("ends        %s, %s (%s)", e.End.Format("2006-01-02"), left, e.Source)
	}
	if rd := r.Random; rd != nil {
		verdict := "indistinguishable from random"
		if rd.Distinguishable {
			verdict = "distinguishable from random"
		}
		p("randomness  consecutive values: %s", verdict)
		for _, t := range rd.Tests {
			mark := "pass"
			if !t.Pass {
				mark = "FAIL"
			}
			p("            %s %-18s %s", mark, t.Name, t.Detail)
		}
	}
}

// stampFormat shows times to the millisecond, always with three digits.
const stampFormat = "2006-01-02T15:04:05.000Z07:00"

func orderLine(s analyze.OrderStats) string {
	out := fmt.Sprintf("%d of %d lower than the previous (%.4f %%), largest displacement %d", s.Descents, s.Pairs, 100*s.DescentFraction, s.MaxDisplacement)
	if s.FirstDescentLine > 0 {
		out += fmt.Sprintf(", first at line %d", s.FirstDescentLine)
	}
	return out
}

func joinLines(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// The HTML report is one self-contained page: inline CSS and hand-written
// SVG, no script, nothing fetched.

const chartW, chartH, padL, padB, padT = 720.0, 220.0, 60.0, 30.0, 10.0

func writeAnalysisHTML(w io.Writer, r *analyze.Report) error {
	var b strings.Builder
	esc := html.EscapeString
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>idmint analyze</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:64em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:2em}
pre{background:#f6f6f6;padding:1em;overflow-x:auto}
.defect{color:#b00020;font-weight:bold}.warning{color:#b36b00;font-weight:bold}.info{color:#555}
svg{background:#fcfcfc;border:1px solid #ddd}
svg text{font:11px sans-serif;fill:#444}
</style></head><body>
<h1>idmint analyze</h1>
`)
	fmt.Fprintf(&b, "<p>%d IDs, format <b>%s</b>", r.Count, esc(r.Format))
	if r.LayoutName != "" {
		fmt.Fprintf(&b, ", layout <b>%s</b> <code>%s</code>", esc(r.LayoutName), esc(r.Layout))
	}
	b.WriteString(".</p>\n<h2>Findings</h2>\n<ul>\n")
	if r.Clean() {
		b.WriteString("<li>Clean: no defect, no warning.</li>\n")
	}
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "<li><span class=\"%s\">%s</span> (%s): %s</li>\n", esc(string(f.Severity)), esc(string(f.Severity)), esc(f.Kind), esc(f.Message))
	}
	b.WriteString("</ul>\n")
	var text strings.Builder
	writeAnalysisText(&text, r)
	if t := r.Time; t != nil && len(t.Histogram) > 0 {
		b.WriteString("<h2>IDs over time</h2>\n")
		vals := make([]float64, len(t.Histogram))
		for i, h := range t.Histogram {
			vals[i] = float64(h.Count)
		}
		barChart(&b, vals, nil, "IDs per bar",
			t.Histogram[0].Start.Format("2006-01-02 15:04:05.000"), t.Last.Add(t.Tick).Format("2006-01-02 15:04:05.000"), 0)
	}
	if m := r.Mod; m != nil {
		fmt.Fprintf(&b, "<h2>id mod N, N = 2..%d</h2>\n<p>Bar height: chi-square z-score (Wilson–Hilferty) of each N; red bars are skewed (p &lt; %.2g and a residue %.2gx its share).</p>\n", analyze.MaxMod, m.Alpha, m.MinShare)
		vals := make([]float64, len(m.ByN))
		red := make([]bool, len(m.ByN))
		for i, x := range m.ByN {
			vals[i] = math.Max(x.Z, 0)
			red[i] = m.IsSkewed(x)
		}
		barChart(&b, vals, red, "z", "N = 2", fmt.Sprintf("N = %d", analyze.MaxMod), 0)
		fmt.Fprintf(&b, "<p>Residues of the worst N = %d (line: the expected count).</p>\n", m.Worst.N)
		vals = make([]float64, len(m.WorstBuckets))
		for i, c := range m.WorstBuckets {
			vals[i] = float64(c)
		}
		barChart(&b, vals, nil, "IDs", "residue 0", fmt.Sprintf("residue %d", m.Worst.N-1), float64(m.Sample)/float64(m.Worst.N))
	}
	if o := r.Order; len(o.Plot) > 0 {
		b.WriteString("<h2>Out of order</h2>\n<p>Largest displacement (positions between an ID's place in the input and in sorted order) in each slice of the input; red bars hold IDs lower than the one before.</p>\n")
		vals := make([]float64, len(o.Plot))
		red := make([]bool, len(o.Plot))
		for i, pt := range o.Plot {
			vals[i] = float64(pt.MaxDisplacement)
			red[i] = pt.Descents > 0
		}
		barChart(&b, vals, red, "displacement", "ID 1", fmt.Sprintf("ID %d", r.Count), 0)
	}
	fmt.Fprintf(&b, "<h2>Summary</h2>\n<pre>%s</pre>\n</body></html>\n", esc(text.String()))
	_, err := io.WriteString(w, b.String())
	return err
}

// barChart writes an SVG bar chart of vals; red marks bars to highlight,
// ref (if > 0) draws a horizontal reference line at that value.
func barChart(b *strings.Builder, vals []float64, red []bool, yLabel, left, right string, ref float64) {
	top := ref
	for _, v := range vals {
		top = math.Max(top, v)
	}
	if top <= 0 {
		top = 1
	}
	plotW, plotH := chartW-padL-10, chartH-padB-padT
	y := func(v float64) float64 { return padT + plotH - v/top*plotH }
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`+"\n", padL, padT, padL, padT+plotH)
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", padL-4, padT+8, html.EscapeString(compactNum(top)))
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end">0</text>`+"\n", padL-4, padT+plotH)
	fmt.Fprintf(b, `<text x="12" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, html.EscapeString(yLabel))
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", padL, chartH-8, html.EscapeString(left))
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", padL+plotW, chartH-8, html.EscapeString(right))
	bw := plotW / float64(len(vals))
	gap := 0.0
	if bw > 3 {
		gap = 1
	}
	for i, v := range vals {
		fill := "#4a78b5"
		if red != nil && red[i] {
			fill = "#c0392b"
		}
		h := v / top * plotH
		fmt.Fprintf(b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s"/>`+"\n", padL+float64(i)*bw, y(v), math.Max(bw-gap, 0.5), h, fill)
	}
	if ref > 0 {
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.2f" x2="%.0f" y2="%.2f" stroke="#2a9d3a" stroke-dasharray="4 3"/>`+"\n", padL, y(ref), padL+plotW, y(ref))
	}
	b.WriteString("</svg>\n")
}

func compactNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
