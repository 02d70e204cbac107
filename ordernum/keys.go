package ordernum

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ParseKeys reads a key ring: entries "VERSION:KEY" separated by newlines or
// semicolons, where KEY is what ParseKey reads (hex or base64 of 16, 24 or
// 32 bytes). Blank entries and entries starting with # are skipped. It
// returns the keys highest version first — the shape New takes: keys[0]
// issues, keys[1:] still decode — and no keys and no error for text with no
// entries (the caller decides whether that is an error).
//
// This is the syntax of the CLI's --secret-file and IDMINT_ORDERNUM_SECRET
// and of the server's key_file and key_env options. Errors are *FieldErrors
// wrapping ErrKey that name the entry by its position and version; they
// never contain key material.
func ParseKeys(text string) ([]Key, error) {
	var keys []Key
	seen := map[int]bool{}
	for i, entry := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ';' || r == '\r' }) {
		entry = strings.TrimSpace(entry)
		if entry == "" || strings.HasPrefix(entry, "#") {
			continue
		}
		pos := fmt.Sprintf("entry %d", i+1)
		v, material, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fieldErr(ErrKey, "key", pos, "want VERSION:KEY")
		}
		v = strings.TrimSpace(v)
		version, err := strconv.Atoi(v)
		if err != nil {
			// Never quote the text: a file that is not a key ring
			// (a password file named by mistake or on purpose) would
			// have its first bytes echoed ("root" from /etc/shadow).
			return nil, fieldErr(ErrKey, "key", pos, "version (%d characters) is not a number", len(v))
		}
		pos = fmt.Sprintf("entry %d (version %d)", i+1, version)
		if seen[version] {
			return nil, fieldErr(ErrKey, "key", pos, "version %d given twice", version)
		}
		seen[version] = true
		k, err := ParseKey(version, material)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return nil, fieldErr(ErrKey, "key", pos, "%s", fe.Reason)
			}
			return nil, err
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Version() > keys[j].Version() })
	return keys, nil
}

// SequenceKey is the legacy name of an order-number sequence: SequenceRow
// replaced it in the server, because a segment key could be created with
// this very name and read or advance the sequence. The server reads it
// once, to continue a legacy sequence in its new row (never from its
// start again).
//
// SequenceKey names the segment key whose numbers a format's order numbers
// permute, so that the CLI and the server draw from the same sequence: base
// itself for a format without a date part, and base + ":" + the calendar
// date of day in its own location as YYYYMMDD for one with a date part —
// one sequence per day, because a date format's capacity is per day (pass
// day.In(loc) to choose the zone). The name is the same whatever the date
// layout (yyMMdd or yyyyMMdd).
func SequenceKey(base string, f Format, day time.Time) string {
	if !f.HasDate() {
		return base
	}
	return base + ":" + day.Format("20060102")
}

// SequencePrefix starts every row SequenceRow names. Key and store names
// (server.CheckName, Leaf's biz_tag) cannot hold "/", so no segment key
// a user creates can name, read or advance an order-number sequence.
const SequencePrefix = "ordernum/"

// MaxSequenceBase is the longest base name SequenceRow accepts: its row,
// SequencePrefix + base + "/YYYYMMDD", must fit a segment row name (128
// bytes, segment.MaxKeyLen).
const MaxSequenceBase = 128 - len(SequencePrefix) - len("/20060102")

// SequenceRow names the segment row whose numbers an order-number key
// permutes: SequencePrefix + base, and with a date part "/" + the calendar
// date of day (in its own location) as YYYYMMDD — one sequence per day,
// because a date format's capacity is per day. Unlike SequenceKey's rows,
// these live in a namespace no segment key can name. It returns an error
// naming the length when base is longer than MaxSequenceBase.
func SequenceRow(base string, f Format, day time.Time) (string, error) {
	if len(base) > MaxSequenceBase {
		return "", fieldErr(ErrConfig, "key", clip(base), "an order-number key name is %d bytes, at most %d (its sequence row %s<name>/YYYYMMDD must fit 128 bytes)", len(base), MaxSequenceBase, SequencePrefix)
	}
	if !f.HasDate() {
		return SequencePrefix + base, nil
	}
	return SequencePrefix + base + "/" + day.Format("20060102"), nil
}

// MaxKeyFileBytes bounds a key file: a ring of 32 versions of AES-256 in
// hex is about 2.2 KiB. A file named by mistake (or /dev/zero) is refused
// after this many bytes instead of read to the end.
const MaxKeyFileBytes = 4 << 10

// ReadKeyFile reads a key file (ParseKeys's syntax) of at most
// MaxKeyFileBytes. It refuses anything but a regular file before opening
// it (a FIFO would block the open; /dev/zero never ends) and again after
// (the path may have been swapped). Errors name the path and the cause,
// never the content.
func ReadKeyFile(path string) ([]byte, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("ordernum: key file %s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("ordernum: key file %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxKeyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxKeyFileBytes {
		return nil, fmt.Errorf("ordernum: key file %s is larger than %d bytes; a key file holds a few VERSION:KEY lines", path, MaxKeyFileBytes)
	}
	return b, nil
}
