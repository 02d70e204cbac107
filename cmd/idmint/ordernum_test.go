package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testSecret = "1:000102030405060708090a0b0c0d0e0f;2:0f0e0d0c0b0a09080706050403020100"

func TestOrdernumIssueDecodeCheck(t *testing.T) {
	t.Parallel()
	store := "sqlite://" + filepath.Join(t.TempDir(), "seq.db")
	vars := map[string]string{secretEnv: testSecret}
	seen := map[string]bool{}
	for run := 0; run < 3; run++ { // three processes' worth: the sequence survives
		code, out, errOut := runCLIEnv(t, vars, "ordernum", "--store", store, "-n", "200")
		if code != 0 {
			t.Fatalf("issue: exit %d: %s", code, errOut)
		}
		for _, n := range strings.Fields(out) {
			if len(n) != 16 {
				t.Fatalf("order number %q is not 16 characters", n)
			}
			if seen[n] {
				t.Fatalf("order number %s issued twice", n)
			}
			seen[n] = true
		}
	}
	var one string
	for n := range seen {
		one = n
		break
	}
	code, out, errOut := runCLIEnv(t, vars, "ordernum", "decode", one)
	if code != 0 || !strings.Contains(out, "key_version=2") || !strings.Contains(out, "seq=") {
		t.Fatalf("decode: exit %d: %s %s", code, out, errOut)
	}
	// check needs no key at all
	if code, out, _ := runCLI(t, "ordernum", "check", one); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("check: exit %d: %s", code, out)
	}
	bad := one[:5] + string("0123456789"[(int(one[5]-'0')+1)%10]) + one[6:]
	if code, out, _ := runCLI(t, "ordernum", "check", bad); code != 2 || !strings.Contains(out, "INVALID") {
		t.Fatalf("check of a mistyped number: exit %d: %s", code, out)
	}
}

func TestOrdernumSecretFromFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("# order keys\n1:000102030405060708090a0b0c0d0e0f\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "ordernum", "--secret-file", secret, "--store", "sqlite://"+filepath.Join(dir, "s.db"),
		"--format", "alphabet=base32,length=12,prefix=K,check=mod37", "-n", "3")
	if code != 0 || len(strings.Fields(out)) != 3 || !strings.HasPrefix(out, "K") {
		t.Fatalf("exit %d: %q %s", code, out, errOut)
	}
}

func TestOrdernumBadInput(t *testing.T) {
	t.Parallel()
	store := "sqlite://" + filepath.Join(t.TempDir(), "s.db")
	vars := map[string]string{secretEnv: testSecret}
	cases := []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, []string{"ordernum", "--store", store}, "no key material"},
		{map[string]string{secretEnv: "1:abcd"}, []string{"ordernum", "--store", store}, "entry 1"},
		{map[string]string{secretEnv: "x:00"}, []string{"ordernum", "--store", store}, "version"}, // names the part, never echoes key material
		{vars, []string{"ordernum", "--store", store, "--format", "length=3"}, "length"},
		{vars, []string{"ordernum", "--store", store, "--tz", "Mars/Base"}, "Mars/Base"},
		{vars, []string{"ordernum", "--store", store, "-n", "0"}, "-n: 0"},
		{vars, []string{"ordernum", "--store", store, "--key", ""}, "--key"},
		{vars, []string{"ordernum", "decode"}, "missing argument"},
		{vars, []string{"ordernum", "decode", "12"}, `"12"`},
		{nil, []string{"ordernum", "check", "abc"}, "INVALID"},
	}
	for _, c := range cases {
		code, out, errOut := runCLIEnv(t, c.vars, c.args...)
		if code != 2 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d, output %q %q; want exit 2 naming %q", c.args, code, out, errOut, c.want)
		}
		if strings.Contains(errOut, "000102030405") {
			t.Errorf("%v: key material leaked into the error: %s", c.args, errOut)
		}
	}
}
