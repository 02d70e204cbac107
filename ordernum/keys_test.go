package ordernum_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idmint/idmint/ordernum"
)

const (
	hexKey1 = "000102030405060708090a0b0c0d0e0f"
	hexKey2 = "0f0e0d0c0b0a09080706050403020100"
)

func TestParseKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		text     string
		versions []int
		errLike  string // substring of the error; "" means success
	}{
		{"empty", "", nil, ""},
		{"comments only", "# keys\n\n  \n", nil, ""},
		{"one", "1:" + hexKey1, []int{1}, ""},
		{"highest first", "1:" + hexKey1 + "\n3:" + hexKey2 + "\n", []int{3, 1}, ""},
		{"semicolons and spaces", " 2 : " + hexKey1 + " ; 7:" + hexKey2, []int{7, 2}, ""},
		{"crlf", "1:" + hexKey1 + "\r\n2:" + hexKey2 + "\r\n", []int{2, 1}, ""},
		{"base64", "0:AAECAwQFBgcICQoLDA0ODw==", []int{0}, ""},
		{"no colon", hexKey1, nil, "entry 1"},
		{"bad version", "x:" + hexKey1, nil, "version (1 characters) is not a number"},
		// Never an echo of the text: /etc/shadow named as a key file
		// used to answer `version "root"`.
		{"shadow", "root:$6$salt$hash:19000:0:99999:7:::", nil, "version (4 characters) is not a number"},
		{"duplicate", "1:" + hexKey1 + "\n1:" + hexKey2, nil, "given twice"},
		{"short key", "1:abcd", nil, "entry 1 (version 1)"},
		{"version too big", "99:" + hexKey1, nil, "entry 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := ordernum.ParseKeys(tc.text)
			if tc.errLike != "" {
				var fe *ordernum.FieldError
				if !errors.Is(err, ordernum.ErrKey) || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.errLike) {
					t.Fatalf("err = %v, want ErrKey mentioning %s", err, tc.errLike)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, k := range keys {
				got = append(got, k.Version())
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.versions) {
				t.Fatalf("versions %v, want %v", got, tc.versions)
			}
		})
	}
}

// Errors never quote key material, wherever it sits in the entry.
func TestParseKeysNeverPrintsKeys(t *testing.T) {
	t.Parallel()
	secret := "s3cret!s3cret!s3cret!s3cret!s3cr" // 32 characters, neither hex nor base64
	for _, text := range []string{
		"1:" + secret,
		secret + ":1",
		secret,
		"1:" + hexKey1 + "\n1:" + secret,
		"1:" + hexKey1 + "ff",
	} {
		_, err := ordernum.ParseKeys(text)
		if err == nil {
			t.Fatalf("%q: no error", text)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), hexKey1) {
			t.Fatalf("error quotes key material: %v", err)
		}
	}
}

func TestSequenceKey(t *testing.T) {
	t.Parallel()
	tokyo := time.FixedZone("JST", 9*3600)
	// 2025-08-17 20:00 UTC is already the 18th in Tokyo.
	at := time.Date(2025, 8, 17, 20, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec string
		day  time.Time
		want string
	}{
		{"length=16", at, "orders"},
		{"length=16,date=yyMMdd", at, "orders:20250817"},
		{"length=16,date=yyyyMMdd", at, "orders:20250817"},
		{"length=16,date=yyMMdd", at.In(tokyo), "orders:20250818"},
	} {
		if got := ordernum.SequenceKey("orders", ordernum.MustParseFormat(tc.spec), tc.day); got != tc.want {
			t.Errorf("%s at %v: %q, want %q", tc.spec, tc.day, got, tc.want)
		}
	}
}

func ExampleParseKeys() {
	keys, err := ordernum.ParseKeys("# rotated 2025-08\n1:" + hexKey1 + "\n2:" + hexKey2 + "\n")
	if err != nil {
		panic(err)
	}
	f := ordernum.MustParseFormat("length=16,version")
	c, err := ordernum.New(f, keys[0], keys[1:]...) // version 2 issues, 1 still decodes
	if err != nil {
		panic(err)
	}
	fmt.Println(keys[0], c.Version())
	// Output:
	// ordernum.Key{version: 2, AES-128, material redacted} 2
}

func ExampleSequenceKey() {
	f := ordernum.MustParseFormat("length=16,date=yyMMdd")
	day := time.Date(2025, 8, 17, 23, 30, 0, 0, time.UTC)
	fmt.Println(ordernum.SequenceKey("orders", f, day))
	fmt.Println(ordernum.SequenceKey("orders", f, day.In(time.FixedZone("UTC+8", 8*3600))))
	// Output:
	// orders:20250817
	// orders:20250818
}

func FuzzParseKeys(f *testing.F) {
	f.Add("1:" + hexKey1)
	f.Add("1:" + hexKey1 + ";2:" + hexKey2)
	f.Add("# c\n0:AAECAwQFBgcICQoLDA0ODw==\r\n")
	f.Add("x:y")
	f.Fuzz(func(t *testing.T, text string) {
		keys, err := ordernum.ParseKeys(text)
		if err != nil {
			if !errors.Is(err, ordernum.ErrKey) {
				t.Fatalf("error %v does not wrap ErrKey", err)
			}
			return
		}
		for i := 1; i < len(keys); i++ {
			if keys[i].Version() >= keys[i-1].Version() {
				t.Fatalf("versions not strictly decreasing: %v", keys)
			}
		}
		for _, k := range keys {
			if k.IsZero() {
				t.Fatal("zero key returned")
			}
		}
	})
}
