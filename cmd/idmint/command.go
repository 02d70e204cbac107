package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/server"
)

// command is one subcommand. Each lives in a file of its own and registers
// itself from init, so adding one never touches the dispatcher.
type command struct {
	name    string
	summary string // one line for `idmint help`
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what a subcommand may touch: its streams and the process
// environment (library packages never read either).
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// again is closed at the second SIGINT or SIGTERM (nil: never).
	again <-chan struct{}
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// usageError is bad input on the command line: it names the flag (or
// argument) and the value, and makes idmint exit with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitStatus ends a command with a status of its own (idmint doctor's 3
// and 4) after it printed what it had to say; run prints nothing more.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// configProblems is the usage error of a configuration with problems:
// one frame, a line for each problem under "idmint CMD: ...", instead of
// the list followed by a second "invalid configuration".
func configProblems(ps []server.Problem) error {
	var b strings.Builder
	fmt.Fprintf(&b, "the configuration has %d problem(s):", len(ps))
	for _, p := range ps {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	return &usageError{b.String()}
}

// run dispatches args to a subcommand and returns the exit status: 0 on
// success, 2 on bad input, 1 on any other failure (or a command's own
// status, exitStatus).
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		printHelp(e.stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "idmint: unknown command %q (run `idmint help` for the list)\n", args[0])
		return 2
	}
	err := c.run(ctx, e, args[1:])
	var ue *usageError
	var es *exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &es):
		return es.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "idmint %s: %s\n", c.name, idtext.UserText(err.Error()))
		return 2
	default:
		fmt.Fprintf(e.stderr, "idmint %s: %s\n", c.name, idtext.UserText(err.Error()))
		return 1
	}
}

func printHelp(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "idmint — unique IDs that never repeat\n\nUsage: idmint <command> [flags] [args]\n\nCommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `idmint <command> -h` for a command's flags.")
}

// newFlags returns a flag set whose parse errors become usage errors naming
// the flag and value. The flag package prints nothing itself: run prints the
// error once, and -h prints the usage to stdout (asked-for help is output,
// not a diagnostic).
func newFlags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("idmint "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(e.stdout, "Usage: idmint %s %s\n", name, synopsis)
		if hasFlags(fs) {
			fmt.Fprintln(e.stdout, "\nFlags:")
			printFlags(e.stdout, fs)
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printFlags is flag.PrintDefaults with the names spelt as the README
// spells them (--layout) and backquotes in a usage left as they are:
// PrintDefaults would take a backquoted word for the value's name and print
// "-layout idmint layouts".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g := *f
		g.Usage = strings.ReplaceAll(f.Usage, "`", "'")
		arg, usage := flag.UnquoteUsage(&g)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		if arg != "" {
			line += " " + arg
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		switch f.DefValue {
		case "", "0", "false":
		default:
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

// parseFlags parses args, allowing flags after positional arguments
// (`idmint decode 123 --layout twitter`), and returns the positionals. -h
// prints the usage to stdout and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return nil, err
			}
			return nil, usagef("%s (run `%s -h` for the flags)", strings.TrimSpace(err.Error()), fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseNoArgs is parseFlags for a command that takes flags only: a stray
// argument is an error, not silently ignored.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (%s takes flags only; run `%s -h`)", pos[0], fs.Name(), fs.Name())
	}
	return nil
}

// writeIndentedJSON writes v as the --json output of a command: indented
// by two spaces, one value, a newline at the end.
func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
