package idtext

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

var errSyntax = errors.New("test: invalid character")

func TestQuote(t *testing.T) {
	t.Parallel()
	if got := Quote("a\"b"); got != `"a\"b"` {
		t.Errorf("Quote = %s", got)
	}
	long := strings.Repeat("x", 100)
	if got, want := Quote(long), `"`+long[:64]+`"...`; got != want {
		t.Errorf("Quote(100 x) = %s, want %s", got, want)
	}
}

func TestDecodeHex(t *testing.T) {
	t.Parallel()
	var b [3]byte
	if err := DecodeHex(b[:], "0aF9c3", errSyntax); err != nil || b != [3]byte{0x0a, 0xf9, 0xc3} {
		t.Fatalf("DecodeHex = %x, %v", b, err)
	}
	for _, tc := range []struct {
		in  string
		msg string
	}{
		{"g0aaaa", `"g0aaaa": 'g' at position 0 is not a hex digit`},
		{"0gaaaa", `"0gaaaa": 'g' at position 1 is not a hex digit`},
		{"aaaa-a", `"aaaa-a": '-' at position 4 is not a hex digit`},
	} {
		err := DecodeHex(b[:], tc.in, errSyntax)
		if !errors.Is(err, errSyntax) || err.Error() != "test: invalid character: "+tc.msg {
			t.Errorf("DecodeHex(%q) = %v", tc.in, err)
		}
	}
}

func FuzzDecodeHex(f *testing.F) {
	f.Add("00ff")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		b := make([]byte, len(s)/2)
		err := DecodeHex(b, s, errSyntax)
		if err != nil {
			if !errors.Is(err, errSyntax) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if got := strings.ToLower(s[:2*len(b)]); got != hex.EncodeToString(b) {
			t.Fatalf("round trip %q → %s", s, hex.EncodeToString(b))
		}
	})
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"node-1:7070":             "node-1:7070",
		"ünïcode":                 "ünïcode",
		"\x1b]0;owned\x07\x1b[2J": `"\x1b]0;owned\a\x1b[2J"`,
		"a\tb":                    `"a\tb"`,
		"bad\xffutf8":             `"bad\xffutf8"`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %s; want %s", in, got, want)
		}
	}
}

func TestUserText(t *testing.T) {
	for in, want := range map[string]string{
		`server: bad key name "a b"`:                                      `bad key name "a b"`,
		`strategies: id "abc" is not a number`:                            `id "abc" is not a number`,
		`server: key "x" (segment): segment: sqlstore: store unavailable`: `key "x" (segment): store unavailable`,
		`count: 5 is out of range: must be between 1 and 3 (max_count)`:   `count: 5 is out of range: must be between 1 and 3 (max_count)`,
		`line 1: witness: must be "none" or an etcd:// URL`:               `line 1: witness: must be "none" or an etcd:// URL`,
		`no colon here`:          `no colon here`,
		`servers: not a package`: `servers: not a package`,
		`key "server: x": gone`:  `key "server: x": gone`,
	} {
		if got := UserText(in); got != want {
			t.Errorf("UserText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrub(t *testing.T) {
	for in, want := range map[string]string{
		`connect postgres://u:xxxxx@db.internal:5432/idmint?sslmode=disable: no answer`: `connect [url]: no answer`,
		`dial tcp 10.1.2.3:5432: connect: connection refused`:                           `dial tcp [address]: connect: connection refused`,
		`dial tcp [fe80::1%eth0]:6379: i/o timeout`:                                     `dial tcp [address]: i/o timeout`,
		`dial tcp db.internal:3306: lookup failed`:                                      `dial tcp [address]: lookup failed`,
		`open /var/lib/idmint/segments.db: permission denied`:                           `open [path]: permission denied`,
		`key "order": cannot issue now: store unavailable`:                              `key "order": cannot issue now: store unavailable`,
		`count: 5 is out of range: must be between 1 and 3`:                             `count: 5 is out of range: must be between 1 and 3`,
		`clock behind until 2026-01-01T00:00:00Z by 1.5s`:                               `clock behind until 2026-01-01T00:00:00Z by 1.5s`,
		`i/o timeout`: `i/o timeout`,
	} {
		if got := Scrub(in); got != want {
			t.Errorf("Scrub(%q) = %q, want %q", in, got, want)
		}
	}
}
