package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/idmint/idmint/gene"
	"github.com/idmint/idmint/idformat"
	"github.com/idmint/idmint/node"
	"github.com/idmint/idmint/server/strategies"
	"github.com/idmint/idmint/snowflake"
	"github.com/idmint/idmint/worker"
)

func init() {
	register(command{name: "gen", summary: "issue IDs: idmint gen <kind> [flags] (`idmint gen -h` lists the kinds)", run: runGen})
}

// genKinds maps `idmint gen <kind>` to its implementation. Each returns its
// IDs as text, one per line.
var genKinds = map[string]func(ctx context.Context, e *env, args []string) error{
	"snowflake": genSnowflake,
}

func init() {
	for _, f := range idformat.GeneratorFormats() {
		genKinds[f] = func(ctx context.Context, e *env, args []string) error { return genText(ctx, e, f, args) }
	}
	for _, f := range []string{"timeid-member", "timeid-gene"} {
		genKinds[f] = func(ctx context.Context, e *env, args []string) error { return genMember(ctx, e, f, args) }
	}
}

// geneSecretEnv carries the 16-byte gene key (hex) for timeid-gene.
const geneSecretEnv = "IDMINT_GENE_SECRET"

// genText issues IDs of the UUID family, 128-bit flakes and time+random.
func genText(ctx context.Context, e *env, format string, args []string) error {
	synopsis, w := "[-n N] [--json]", new(uint64)
	fs := newFlags(e, "gen "+format, synopsis)
	if format == idformat.Flake128 {
		// Only flake128 has a worker; the other formats refuse --worker
		// rather than ignore it.
		fs = newFlags(e, "gen "+format, "--worker W [-n N] [--json]")
		w = fs.Uint64("worker", 0, "48-bit worker ID, distinct per running generator (a leased ID or the machine's MAC address)")
	}
	n := fs.Int("n", 1, "how many IDs to issue")
	asJSON := jsonFlag(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := countFlag(*n, maxGen); err != nil {
		return err
	}
	if format == idformat.Flake128 && !flagSet(fs, "worker") {
		return usagef("flag --worker: missing: flake128 needs a 48-bit worker ID no other running generator uses (e.g. --worker 1)")
	}
	g, err := idformat.NewGenerator(format, idformat.GenSettings{Worker: *w})
	if err != nil {
		return usagef("%v", err)
	}
	return withJSON(e, format, *asJSON, func(e *env) error { return writeTexts(ctx, e, *n, g) })
}

// writeTexts issues n IDs from g and prints one per line.
func writeTexts(ctx context.Context, e *env, n int, g idformat.Generator) error {
	out := make([]byte, 0, 64*1024)
	for i := 0; i < n; i++ {
		id, err := g.Next(ctx)
		if err != nil {
			e.stdout.Write(out)
			return err
		}
		out = append(append(out, id...), '\n')
		if len(out) > 48*1024 {
			if _, err := e.stdout.Write(out); err != nil {
				return err
			}
			out = out[:0]
		}
	}
	_, err := e.stdout.Write(out)
	return err
}

// genMember issues IDs derived from a member ID (timeid-member leaks it;
// timeid-gene hides it behind a keyed gene).
func genMember(ctx context.Context, e *env, format string, args []string) error {
	fs := newFlags(e, "gen "+format, "--member ID [-n N] [--json]")
	w := new(uint64)
	if format == "timeid-gene" {
		fs = newFlags(e, "gen "+format, "--member ID [--worker W] [-n N] [--json]")
		w = fs.Uint64("worker", 0, "worker ID (4 bits by default), distinct per running generator")
	}
	n := fs.Int("n", 1, "how many IDs to issue")
	member := fs.String("member", "", "member (user) ID the IDs belong to")
	asJSON := jsonFlag(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := countFlag(*n, maxGen); err != nil {
		return err
	}
	if *member == "" {
		return usagef("flag --member: missing: the member ID the IDs belong to")
	}
	s := idformat.GenSettings{Worker: *w}
	if format == "timeid-gene" {
		key, err := hex.DecodeString(strings.TrimSpace(e.getenv(geneSecretEnv)))
		if err != nil || len(key) != 16 {
			return usagef("env %s: want 16 bytes as 32 hex digits (the gene key)", geneSecretEnv)
		}
		s.Key = key
	}
	g, err := idformat.NewMemberGenerator(format, s)
	if err != nil {
		return usagef("%v", err)
	}
	return withJSON(e, format, *asJSON, func(e *env) error {
		for i := 0; i < *n; i++ {
			id, err := g.NextFor(ctx, *member)
			if err != nil {
				return usagef("flag --member: %v", err)
			}
			fmt.Fprintln(e.stdout, id)
		}
		return nil
	})
}

func runGen(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintf(e.stdout, "Usage: idmint gen <kind> [flags]\n\nKinds: %s\n\nRun `idmint gen <kind> -h` for a kind's flags.\n", kindNames(genKinds))
		return nil
	}
	if len(args) == 0 {
		return usagef("missing kind: idmint gen <kind> [flags], kind is one of: %s", kindNames(genKinds))
	}
	f, ok := genKinds[args[0]]
	if !ok {
		return usagef("kind %q is unknown (want one of: %s)", args[0], kindNames(genKinds))
	}
	return f(ctx, e, args[1:])
}

// countFlag checks -n: at least 1 and at most max.
func countFlag(n, max int) error {
	if n < 1 || n > max {
		return usagef("flag -n: %d is out of range (1..%d)", n, max)
	}
	return nil
}

const maxGen = 10_000_000

func genSnowflake(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "gen snowflake", "[--layout NAME|SPEC] [--node name=v,...] [--coordinator URL] [--horizon FILE] [-n N] [--json]")
	layoutText := fs.String("layout", defaultLayout, "built-in layout name (see `idmint layouts`) or a spec such as time=41:1ms,worker=10,seq=12,epoch=2010-11-04T01:42:54.657Z")
	nodeText := fs.String("node", "", "node field values, e.g. worker=3 (leaf), datacenter=1,worker=3 (twitter); every node field of the layout must be set, unless --coordinator assigns the worker")
	coord := fs.String("coordinator", "", "lease the worker ID from a coordinator: file:///path, etcd://host:2379/prefix, zk://host:2181/snowflake/name, postgres://..., mysql://..., sqlite:///path, static://N, ip://, mac://")
	horizon := fs.String("horizon", "", "file recording the time horizon, so a later run with the clock set back issues nothing at or below this run's IDs; needed without --coordinator and with static://, ip:// or mac:// (the other coordinators record it themselves); "+memoryHorizon+" accepts the risk and keeps it in memory only")
	shardKey := fs.String("shard-key", "", "derive the layout's shard field from this shard key (e.g. a user ID) with the keyed gene of env "+geneSecretEnv+", so one key's IDs land on one shard without revealing it (Instagram's layout)")
	n := fs.Int("n", 1, "how many IDs to issue")
	asJSON := jsonFlag(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := countFlag(*n, maxGen); err != nil {
		return err
	}
	layout, err := snowflake.ParseLayout(*layoutText)
	if err != nil {
		return usagef("flag --layout: %v", err)
	}
	nodeVals, err := snowflake.ParseNode(*nodeText)
	if err != nil {
		return usagef("flag --node: %v", err)
	}
	if *nodeText == "" && *coord == "" && *shardKey == "" && len(layout.NodeFields()) > 0 {
		return usagef("flag --node: missing: layout %s needs %s (e.g. --node %s), or --coordinator to lease a worker ID that no other generator holds",
			layout.Name(), nodeRanges(layout), nodeExample(layout))
	}
	if *shardKey != "" {
		if err := shardFromGene(e, layout, nodeVals, *shardKey); err != nil {
			return err
		}
	}
	var next func(ctx context.Context, dst []int64) (int, error)
	if *coord != "" {
		if err := needHorizon(layout, *coord, *nodeText, *shardKey, *horizon); err != nil {
			return err
		}
		wopts, err := coordinatorHorizon(*coord, *horizon)
		if err != nil {
			return err
		}
		nd, err := node.New(ctx, node.Config{Layout: layout, Coordinator: *coord, Node: nodeVals, Worker: wopts})
		if err != nil {
			if errors.Is(err, snowflake.ErrInvalidNode) {
				return usagef("flag --node: %v", err)
			}
			return err
		}
		defer nd.Close()
		next = nd.NextN
	} else {
		s := snowflake.Settings{Node: nodeVals}
		if *horizon != "" && *horizon != memoryHorizon {
			s.Horizon = snowflake.NewFileHorizon(*horizon)
		}
		g, err := snowflake.New(layout, s)
		if err != nil {
			if errors.Is(err, snowflake.ErrInvalidNode) {
				return usagef("flag --node: %v", err)
			}
			return usagef("%v", err)
		}
		defer g.Close()
		// Checked once the node values are: a bad --node is the first
		// thing to hear about.
		if err := needHorizon(layout, *coord, *nodeText, *shardKey, *horizon); err != nil {
			return err
		}
		next = g.NextN
	}
	return withJSON(e, "snowflake", *asJSON, func(e *env) error { return writeInt64s(ctx, e, *n, next) })
}

// defaultLayout is the layout gen and decode use without --layout: the one
// idmint serve issues, so that what idmint issues decodes as itself.
const defaultLayout = strategies.DefaultLayout

// nodeRanges lists a layout's node fields with their ranges:
// "datacenter=0..31,worker=0..31".
func nodeRanges(l snowflake.Layout) string {
	var parts []string
	for _, f := range l.NodeFields() {
		parts = append(parts, fmt.Sprintf("%s=0..%d", f.Name, int64(1)<<f.Bits-1))
	}
	return strings.Join(parts, ",")
}

// nodeExample is a --node value for a layout: every field 1.
func nodeExample(l snowflake.Layout) string {
	var parts []string
	for _, f := range l.NodeFields() {
		parts = append(parts, f.Name+"=1")
	}
	return strings.Join(parts, ",")
}

// memoryHorizon is the --horizon value that keeps the horizon in memory
// only, as ?horizon=memory does in a static://, ip:// or mac:// URL.
const memoryHorizon = "memory"

// fixedWorker reports whether coord is "" or a coordinator that assigns a
// worker ID without keeping its time horizon (static, ip, mac), and
// whether its URL names a horizon itself (?horizon=).
func fixedWorker(coord string) (fixed, urlHorizon bool) {
	if coord == "" {
		return true, false
	}
	scheme, rest, _ := strings.Cut(coord, "://")
	switch strings.ToLower(scheme) {
	case "static", "ip", "mac":
		_, query, _ := strings.Cut(rest, "?")
		q, err := url.ParseQuery(query)
		return true, err == nil && q.Has("horizon")
	}
	return false, false
}

// needHorizon refuses a generator whose worker ID no coordinator keeps a
// horizon for (--node, --shard-key, a layout without node fields, or
// --coordinator static://, ip://, mac://) when --horizon names nothing: a
// later run with the clock set back would repeat this run's IDs. --node
// and static:// refuse alike, with one text; --horizon memory accepts the
// risk for both.
func needHorizon(l snowflake.Layout, coord, nodeText, shardKey, horizon string) error {
	fixed, urlHorizon := fixedWorker(coord)
	if !fixed || urlHorizon || horizon != "" {
		return nil
	}
	var what string
	switch {
	case coord != "":
		what = "the worker ID from --coordinator " + coord
	case nodeText != "":
		what = "the worker ID from --node " + nodeText
	case shardKey != "":
		what = "the node from --shard-key"
	default:
		what = "layout " + l.Name() + " (no node field)"
	}
	return usagef("flag --horizon: missing: nothing keeps the time horizon of %s, so a later run with the clock set back would repeat IDs this run issues; name a file (--horizon FILE, e.g. --horizon ./snowflake.horizon) or accept the risk with --horizon %s", what, memoryHorizon)
}

// coordinatorHorizon returns the worker options that put the horizon of a
// static, ip or mac coordinator in the --horizon file (in memory with
// --horizon memory). The other coordinators record the horizon
// themselves, so --horizon with them is bad input, as is a horizon named
// twice.
func coordinatorHorizon(coord, horizon string) ([]worker.Option, error) {
	if horizon == "" {
		return nil, nil
	}
	scheme, _, _ := strings.Cut(coord, "://")
	scheme = strings.ToLower(scheme)
	if fixed, urlHorizon := fixedWorker(coord); fixed {
		if urlHorizon {
			return nil, usagef("flag --horizon: %q given, and the --coordinator URL names horizon= too; name the file once", horizon)
		}
		if horizon == memoryHorizon {
			return []worker.Option{worker.WithMemoryHorizon()}, nil
		}
		return []worker.Option{worker.WithHorizonFile(horizon)}, nil
	}
	return nil, usagef("flag --horizon: %q cannot be combined with --coordinator %s://: that coordinator records the horizon itself (only static://, ip:// and mac:// take --horizon)", horizon, scheme)
}

// shardFromGene sets the layout's "shard" node field to the gene of
// shardKey: a keyed hash, so every ID of one shard key carries the same
// shard and the shard reveals nothing about the key without the secret.
func shardFromGene(e *env, layout snowflake.Layout, node map[string]int64, shardKey string) error {
	bits := 0
	for _, f := range layout.NodeFields() {
		if f.Name == "shard" {
			bits = f.Bits
		}
	}
	if bits == 0 {
		return usagef("flag --shard-key: layout %s has no shard field (instagram has one)", layout.Name())
	}
	if _, set := node["shard"]; set {
		return usagef("flag --shard-key: cannot be combined with shard= in --node")
	}
	key, err := hex.DecodeString(strings.TrimSpace(e.getenv(geneSecretEnv)))
	if err != nil || len(key) != gene.KeySize {
		return usagef("env %s: want %d bytes as %d hex digits (the gene key)", geneSecretEnv, gene.KeySize, 2*gene.KeySize)
	}
	h, err := gene.New(key, bits)
	if err != nil {
		return usagef("flag --shard-key: %v", err)
	}
	node["shard"] = int64(h.OfString(shardKey))
	return nil
}

// writeInt64s issues n IDs in batches and prints one per line.
func writeInt64s(ctx context.Context, e *env, n int, next func(context.Context, []int64) (int, error)) error {
	buf := make([]int64, min(n, 4096))
	out := make([]byte, 0, 64*1024)
	for n > 0 {
		got, err := next(ctx, buf[:min(n, len(buf))])
		for _, id := range buf[:got] {
			out = strconv.AppendInt(out, id, 10)
			out = append(out, '\n')
		}
		if len(out) > 48*1024 || err != nil || got == n {
			if _, werr := e.stdout.Write(out); werr != nil {
				return werr
			}
			out = out[:0]
		}
		if err != nil {
			return err
		}
		n -= got
	}
	_, err := e.stdout.Write(out)
	return err
}

// jsonFlag registers a gen kind's --json flag.
func jsonFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, `print {"kind":KIND,"ids":["ID",...]}, every ID a string (JavaScript loses precision above 2^53)`)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// withJSON runs body with stdout turned, when asJSON, from one ID per line
// into one JSON object holding them all. The object is closed even when body
// fails, so stdout holds valid JSON of the IDs issued before the error.
func withJSON(e *env, kind string, asJSON bool, body func(e *env) error) error {
	if !asJSON {
		return body(e)
	}
	jw := &jsonIDs{w: e.stdout}
	jw.buf = append(jw.buf, `{"kind":`...)
	jw.buf = strconv.AppendQuote(jw.buf, kind)
	jw.buf = append(jw.buf, `,"ids":[`...)
	je := *e
	je.stdout = jw
	err := body(&je)
	if cerr := jw.close(); err == nil {
		err = cerr
	}
	return err
}

// jsonIDs is an io.Writer that takes IDs one per line and writes them as
// the elements of a JSON array of strings.
type jsonIDs struct {
	w       io.Writer
	buf     []byte
	partial []byte // a line not yet ended
	n       int
}

func (j *jsonIDs) Write(p []byte) (int, error) {
	rest := p
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			j.partial = append(j.partial, rest...)
			break
		}
		line := rest[:i]
		if len(j.partial) > 0 {
			line = append(j.partial, line...)
			j.partial = j.partial[:0]
		}
		if j.n > 0 {
			j.buf = append(j.buf, ',')
		}
		j.n++
		// IDs are printable ASCII, where Go's quoting is JSON's.
		j.buf = strconv.AppendQuote(j.buf, string(line))
		rest = rest[i+1:]
	}
	if len(j.buf) > 48*1024 {
		if _, err := j.w.Write(j.buf); err != nil {
			return 0, err
		}
		j.buf = j.buf[:0]
	}
	return len(p), nil
}

func (j *jsonIDs) close() error {
	if len(j.partial) > 0 {
		j.Write([]byte{'\n'})
	}
	j.buf = append(j.buf, "]}\n"...)
	_, err := j.w.Write(j.buf)
	return err
}

// kindNames lists a map's keys, sorted, comma-separated.
func kindNames[V any](m map[string]V) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
