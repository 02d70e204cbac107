package ordernum

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	for _, size := range []int{16, 24, 32} {
		m := bytes.Repeat([]byte{0xA7}, size)
		m[0] = 0xFB // base64 '+' / '-' alphabets
		for _, text := range []string{
			hex.EncodeToString(m),
			strings.ToUpper(hex.EncodeToString(m)),
			" " + base64.StdEncoding.EncodeToString(m) + "\n",
			base64.RawStdEncoding.EncodeToString(m),
			base64.URLEncoding.EncodeToString(m),
			base64.RawURLEncoding.EncodeToString(m),
		} {
			k, err := ParseKey(4, text)
			if err != nil {
				t.Errorf("ParseKey(%d-byte key as %q): %v", size, text, err)
				continue
			}
			if !bytes.Equal(k.material, m) || k.Version() != 4 || k.Bits() != 8*size {
				t.Errorf("ParseKey(%q) = wrong key", text)
			}
		}
	}
}

// TestKeyNeverLeaks checks that no error, fmt verb or log line carries the
// key material or its text.
func TestKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte{0x5E}, 32)
	hexText := hex.EncodeToString(secret)
	k, err := ParseKey(7, hexText)
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("loaded", "key", k)
	outputs := []string{
		k.String(), fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %X %q %d", k, k, k, k, k, k, k, k),
		fmt.Sprintf("%v", struct{ K Key }{k}), fmt.Sprintf("%+v", &k), logBuf.String(),
	}
	for _, o := range outputs {
		if strings.Contains(strings.ToLower(o), "5e5e") || strings.Contains(o, "^^") || strings.Contains(o, "[94 94") {
			t.Errorf("key material leaked: %s", o)
		}
	}
	if !strings.Contains(k.String(), "version: 7, AES-256, material redacted") {
		t.Errorf("String = %q", k.String())
	}

	// Errors give lengths, never text.
	bad := []struct {
		text string
		says string
	}{
		{hexText[:30], "30 characters"},
		{hexText + "5e", "66 characters"},
		{"5e5e5e5e-not-a-key-5e5e5e5e5e5e5e5e", "35 characters"},
		{base64.StdEncoding.EncodeToString(secret[:20]), "28 characters"},
		{"", "0 characters"},
	}
	for _, b := range bad {
		_, err := ParseKey(0, b.text)
		if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), b.says) {
			t.Errorf("ParseKey(bad) = %v, want ErrKey saying %q", err, b.says)
		}
		if err != nil && b.text != "" && strings.Contains(err.Error(), b.text) {
			t.Errorf("error quotes the key text: %v", err)
		}
		if err != nil && strings.Contains(err.Error(), "5e5e") {
			t.Errorf("error leaks key text: %v", err)
		}
	}
	for _, n := range []int{0, 8, 15, 17, 31, 33, 64} {
		_, err := NewKey(0, bytes.Repeat([]byte{0x5E}, n))
		if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), fmt.Sprintf("is %d bytes", n)) || strings.Contains(err.Error(), "^") {
			t.Errorf("NewKey(%d bytes) = %v", n, err)
		}
	}
	for _, v := range []int{-1, 32} {
		if _, err := NewKey(v, secret); !errors.Is(err, ErrKey) {
			t.Errorf("NewKey(version %d) = %v, want ErrKey", v, err)
		}
	}
}

func TestNewKeyCopies(t *testing.T) {
	t.Parallel()
	m := bytes.Repeat([]byte{1}, 16)
	k, _ := NewKey(0, m)
	m[0] = 2
	if k.material[0] != 1 {
		t.Error("NewKey kept the caller's slice")
	}
}
