package doccheck

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idmint/idmint/testkit/idtest"
)

var (
	commandRE = regexp.MustCompile(`(?m)^  ([a-z]+)\s{2,}`)             // a line of `idmint help`'s Commands:
	flagRE    = regexp.MustCompile(`(?m)^  (-{1,2})([a-z][a-z0-9-]*)`)  // a flag line of -h
	nestedRE  = regexp.MustCompile("Run `idmint ([a-z]+) ([a-z]+) -h`") // a command with subcommands
	kindsRE   = regexp.MustCompile(`(?m)^Kinds: (.*)$`)                 // idmint gen -h
	sectionRE = regexp.MustCompile("(?m)^#{2,3} .*$")
)

// Every subcommand `idmint help` lists, every kind of `idmint gen`, every
// nested subcommand (monotonic seed, sql instagram, ordernum decode and
// check), and every flag their -h prints has its place in docs/cli.md: a
// heading naming the command in backticks (`idmint serve`, `gen snowflake`)
// and, in the text under it, each flag as `--flag` (or `-n` for a
// one-letter flag). A flag or command added without documentation fails
// here. Flags whose help starts with "internal:" are listed too.
func TestEveryCommandAndFlagInCLIDoc(t *testing.T) {
	if testing.Short() {
		t.Skip("builds idmint; without -short")
	}
	bin := filepath.Join(t.TempDir(), "idmint")
	build := idtest.BuildCommand(bin)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help := func(args ...string) string {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("idmint %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	doc := read(t, "docs/cli.md")
	// section returns the text from the heading that names name in
	// backticks to the next heading.
	section := func(name string) (string, bool) {
		heads := sectionRE.FindAllStringIndex(doc, -1)
		for k, h := range heads {
			if !strings.Contains(doc[h[0]:h[1]], "`"+name+"`") {
				continue
			}
			end := len(doc)
			if k+1 < len(heads) {
				end = heads[k+1][0]
			}
			return doc[h[0]:end], true
		}
		return "", false
	}
	check := func(heading string, args ...string) {
		text, ok := section(heading)
		if !ok {
			t.Errorf("docs/cli.md has no heading naming `%s` (idmint %s)", heading, strings.Join(args, " "))
			return
		}
		for _, m := range flagRE.FindAllStringSubmatch(help(append(args, "-h")...), -1) {
			flag := "--" + m[2]
			if len(m[2]) == 1 {
				flag = "-" + m[2]
			}
			if !strings.Contains(text, "`"+flag) && !strings.Contains(text, ", "+flag+"`") {
				t.Errorf("docs/cli.md, section `%s`: flag %s of idmint %s is not documented", heading, flag, strings.Join(args, " "))
			}
		}
	}
	cmds := commandRE.FindAllStringSubmatch(help("help"), -1)
	if len(cmds) < 10 {
		t.Fatalf("idmint help lists %d commands; the parse is broken", len(cmds))
	}
	for _, m := range cmds {
		cmd := m[1]
		check("idmint "+cmd, cmd)
		out := help(cmd, "-h")
		for _, n := range nestedRE.FindAllStringSubmatch(out, -1) {
			check(n[1]+" "+n[2], n[1], n[2])
		}
		if k := kindsRE.FindStringSubmatch(out); k != nil {
			for _, kind := range strings.Split(k[1], ", ") {
				check(cmd+" "+kind, cmd, kind)
			}
		}
	}
	for _, sub := range []string{"decode", "check"} { // idmint ordernum [decode|check]
		check("ordernum "+sub, "ordernum", sub)
	}
}
