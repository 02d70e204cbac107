package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idmint/idmint/ordernum"
	"github.com/idmint/idmint/segment"
	"github.com/idmint/idmint/segment/stores"
	"github.com/idmint/idmint/server/strategies"
)

func init() {
	register(command{name: "ordernum", summary: "issue, decode and check order numbers: idmint ordernum [decode|check] ...", run: runOrdernum})
}

// secretEnv names the environment variable that may carry order-number key
// material. Key material never comes from a flag (it would show in ps and
// shell history) and is never printed.
const secretEnv = "IDMINT_ORDERNUM_SECRET"

const defaultOrderFormat = "length=16,date=yyMMdd,version"

func runOrdernum(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "decode":
			return ordernumDecode(ctx, e, args[1:])
		case "check":
			return ordernumCheck(e, args[1:])
		}
	}
	return ordernumIssue(ctx, e, args)
}

// orderFlags are the flags every ordernum subcommand shares.
type orderFlags struct {
	format, secretFile string
}

func (o *orderFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&o.format, "format", defaultOrderFormat, "order-number format spec, e.g. alphabet=base32,length=13,prefix=K,check=mod37")
	fs.StringVar(&o.secretFile, "secret-file", "", "file with the key material, one VERSION:KEY (hex or base64) per line; default: env "+secretEnv)
}

func (o *orderFlags) parseFormat() (ordernum.Format, error) {
	f, err := ordernum.ParseFormat(o.format)
	if err != nil {
		return ordernum.Format{}, usagef("flag --format: %v", err)
	}
	return f, nil
}

// codec builds the codec from the key material: the highest version issues,
// the others still decode.
func (o *orderFlags) codec(e *env, f ordernum.Format) (*ordernum.Codec, error) {
	var text, source string
	if o.secretFile != "" {
		b, err := ordernum.ReadKeyFile(o.secretFile)
		if err != nil {
			return nil, usagef("flag --secret-file: %v", err)
		}
		text, source = string(b), "--secret-file "+o.secretFile
	} else {
		text, source = e.getenv(secretEnv), "env "+secretEnv
	}
	keys, err := ordernum.ParseKeys(text)
	if err != nil {
		return nil, usagef("%s: %v", source, err)
	}
	if len(keys) == 0 {
		return nil, usagef("no key material: set %s or --secret-file to lines of VERSION:KEY (16, 24 or 32 bytes in hex or base64)", secretEnv)
	}
	c, err := ordernum.New(f, keys[0], keys[1:]...)
	if err != nil {
		return nil, usagef("%s: %v", source, err)
	}
	return c, nil
}

func ordernumIssue(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "ordernum", "[--key NAME] [--store URL] [--format SPEC] [--secret-file F] [--tz ZONE] [-n N]")
	var o orderFlags
	o.register(fs)
	key := fs.String("key", "orders", "order-number key whose sequence is permuted: the same sequence (row ordernum/NAME, with a date part ordernum/NAME/YYYYMMDD) as the server's ordernum key of this name")
	store := fs.String("store", defaultStore, "segment store the sequence comes from")
	tz := fs.String("tz", "UTC", "time zone of the date part")
	n := fs.Int("n", 1, "how many order numbers")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := countFlag(*n, 1_000_000); err != nil {
		return err
	}
	f, err := o.parseFormat()
	if err != nil {
		return err
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil {
		return usagef("flag --tz: %q is not a time zone", *tz)
	}
	if _, err := segment.ValidateKeyInfo(segment.KeyInfo{Key: *key, Step: 1}); err != nil {
		return usagef("flag --key: %v", err)
	}
	c, err := o.codec(e, f)
	if err != nil {
		return err
	}
	if strings.HasPrefix(*store, "sqlite://") {
		if dir := filepath.Dir(strings.TrimPrefix(*store, "sqlite://")); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
		}
	}
	alloc, err := stores.OpenAllocator(ctx, *store, segment.Options{AutoCreate: true, AutoCreateStep: 100, CloseStore: true})
	if err != nil {
		return fmt.Errorf("flag --store: %w", err)
	}
	defer alloc.Close()
	day := time.Now().In(loc)
	// The same row, and the same move from a legacy row, as the server's
	// ordernum key of this name: the two never issue one number twice.
	seqKey, err := strategies.EnsureOrderSequence(ctx, alloc, *key, f, day, 0, "idmint ordernum")
	if err != nil {
		return fmt.Errorf("flag --key: %w", err)
	}
	seqs := make([]int64, *n)
	if _, err := alloc.NextN(ctx, seqKey, seqs); err != nil {
		return err
	}
	out := make([]byte, 0, *n*(f.Length()+1))
	for _, s := range seqs {
		if out, err = c.AppendEncode(out, uint64(s), day); err != nil {
			if errors.Is(err, ordernum.ErrCapacity) {
				return fmt.Errorf("key %s: sequence %d is beyond the format's capacity %d: %w", seqKey, s, f.Capacity(), err)
			}
			return err
		}
		out = append(out, '\n')
	}
	if f.NearCapacity(uint64(seqs[len(seqs)-1])) {
		fmt.Fprintf(e.stderr, "idmint ordernum: warning: key %s has used %.0f%% of the format's capacity %d\n", seqKey, 100*f.Usage(uint64(seqs[len(seqs)-1])), f.Capacity())
	}
	_, err = e.stdout.Write(out)
	return err
}

func ordernumDecode(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "ordernum decode", "<number>... [--format SPEC] [--secret-file F]")
	var o orderFlags
	o.register(fs)
	nums, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(nums) == 0 {
		return usagef("missing argument: the order number to decode")
	}
	f, err := o.parseFormat()
	if err != nil {
		return err
	}
	c, err := o.codec(e, f)
	if err != nil {
		return err
	}
	for _, s := range nums {
		p, err := c.Decode(s)
		if err != nil {
			return usagef("argument %q: %v", s, err)
		}
		fmt.Fprintf(e.stdout, "%s\tseq=%d", s, p.Seq)
		if !p.Date.IsZero() {
			fmt.Fprintf(e.stdout, "\tdate=%s", p.Date.Format("2006-01-02"))
		}
		if f.Versions() > 0 {
			fmt.Fprintf(e.stdout, "\tkey_version=%d", p.Version)
		}
		fmt.Fprintln(e.stdout)
	}
	return nil
}

func ordernumCheck(e *env, args []string) error {
	fs := newFlags(e, "ordernum check", "<number>... [--format SPEC]")
	format := fs.String("format", defaultOrderFormat, "order-number format spec")
	nums, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(nums) == 0 {
		return usagef("missing argument: the order number to check")
	}
	f, err := ordernum.ParseFormat(*format)
	if err != nil {
		return usagef("flag --format: %v", err)
	}
	bad := 0
	for _, s := range nums {
		if err := f.Validate(s); err != nil {
			fmt.Fprintf(e.stdout, "%s\tINVALID\t%v\n", s, err)
			bad++
			continue
		}
		norm, _ := f.Normalize(s)
		fmt.Fprintf(e.stdout, "%s\tok\t%s\n", s, norm)
	}
	if bad > 0 {
		return usagef("%d of %d order numbers are invalid", bad, len(nums))
	}
	return nil
}
