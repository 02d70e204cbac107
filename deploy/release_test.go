package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idmint/idmint/testkit/testserver"
)

// releaseNeed skips the test with msg, or fails it under CI=true (where
// scripts/test.sh runs as root and installs what is missing).
func releaseNeed(t *testing.T, msg string) {
	t.Helper()
	msg += "; run the whole suite as root with scripts/test.sh"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// releaseTools returns the paths of the programs the release test runs,
// skipping (failing under CI=true) when one is missing or the test is not
// root.
func releaseTools(t *testing.T, names ...string) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		releaseNeed(t, "installs the .deb with dpkg, so it runs as root only")
	}
	paths := map[string]string{}
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			releaseNeed(t, n+" is not installed")
		}
		paths[n] = p
	}
	return paths
}

// release runs scripts/release.sh into out (and version, if given) for
// linux/amd64 with the given packages, and returns what it wrote, by file
// name.
func release(t *testing.T, out, packages string, version ...string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", append([]string{"scripts/release.sh", out}, version...)...)
	c.Dir = ".."
	c.Env = append(os.Environ(), "RELEASE_ARCHES=amd64", "RELEASE_PACKAGES="+packages)
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh %s: %v\n%s", out, err, b)
	}
	files := map[string][]byte{}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// TestReleasePackage: scripts/release.sh builds the same bytes twice; its
// SHA256SUMS and SBOM describe the files beside them; the binary is static
// and names its commit; the .rpm holds what the .deb holds; and the .deb
// installs with dpkg (user, data directory, unit, config), runs as the
// idmint user with its own config and hands out IDs, upgrades keeping the
// operator's config and the data, and purges cleanly.
func TestReleasePackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs a release; skipped with -short")
	}
	tools := releaseTools(t, "git", "dpkg", "rpm", "systemd-analyze")
	dir := t.TempDir()

	// Two builds, compared byte for byte. The second finds the Go build
	// cache warm; the packager, the SBOM writer and the time stamps run
	// anew.
	start := time.Now()
	first := release(t, filepath.Join(dir, "a"), "deb rpm")
	t.Logf("scripts/release.sh (linux/amd64 binary, SBOM, .deb, .rpm): %v", time.Since(start).Round(time.Second))
	start = time.Now()
	second := release(t, filepath.Join(dir, "b"), "deb rpm")
	t.Logf("the same again: %v", time.Since(start).Round(time.Second))
	names := func(m map[string][]byte) []string {
		var s []string
		for n := range m {
			s = append(s, n)
		}
		slices.Sort(s)
		return s
	}
	if !slices.Equal(names(first), names(second)) {
		t.Fatalf("two builds wrote different files: %v and %v", names(first), names(second))
	}
	for n, b := range first {
		if !bytes.Equal(b, second[n]) {
			t.Errorf("%s differs between two builds of the same commit (%d and %d bytes)", n, len(b), len(second[n]))
		}
	}
	var bin, deb, rpm, sbom string
	for _, n := range names(first) {
		switch {
		case strings.HasSuffix(n, ".deb"):
			deb = n
		case strings.HasSuffix(n, ".rpm"):
			rpm = n
		case strings.HasSuffix(n, ".spdx.json"):
			sbom = n
		case strings.HasPrefix(n, "idmint-") && strings.HasSuffix(n, "-linux-amd64"):
			bin = n
		}
	}
	if bin == "" || deb == "" || rpm == "" || sbom == "" || first["SHA256SUMS"] == nil {
		t.Fatalf("release.sh wrote %v: want the binary, its .spdx.json, a .deb, an .rpm and SHA256SUMS", names(first))
	}
	out := filepath.Join(dir, "a")

	// SHA256SUMS names every other file, with its digest.
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(first["SHA256SUMS"]))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's DIGEST  NAME", sc.Text())
		}
		d := sha256.Sum256(first[name])
		if first[name] == nil || hex.EncodeToString(d[:]) != sum {
			t.Errorf("SHA256SUMS: %s %s does not match the file", sum, name)
		}
		listed[name] = true
	}
	for n := range first {
		if n != "SHA256SUMS" && !listed[n] {
			t.Errorf("SHA256SUMS does not list %s", n)
		}
	}

	// The binary: static, stamped with this checkout's commit.
	checkStatic(t, filepath.Join(out, bin))
	head := strings.TrimSpace(runOut(t, tools["git"], "-C", "..", "rev-parse", "HEAD"))
	version := strings.TrimSuffix(strings.TrimPrefix(bin, "idmint-"), "-linux-amd64")
	ver := runOut(t, filepath.Join(out, bin), "version")
	for _, want := range []string{"idmint " + version + " ", "commit:      " + head + "\n", "modified:    "} {
		if !strings.Contains(ver, want) {
			t.Errorf("idmint version of the release binary = %q, want %q in it", ver, want)
		}
	}
	if strings.Contains(ver, "unknown") {
		t.Errorf("idmint version of the release binary says unknown: %q", ver)
	}

	// The SBOM: SPDX 2.3, describing this binary by its digest, with the
	// modules it links.
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name, VersionInfo string
			Checksums         []struct{ Algorithm, ChecksumValue string }
		}
	}
	if err := json.Unmarshal(first[sbom], &doc); err != nil {
		t.Fatalf("%s: %v", sbom, err)
	}
	d := sha256.Sum256(first[bin])
	if doc.SPDXVersion != "SPDX-2.3" || len(doc.Packages) < 10 || len(doc.Packages[0].Checksums) != 1 ||
		doc.Packages[0].Checksums[0].ChecksumValue != hex.EncodeToString(d[:]) || doc.Packages[0].VersionInfo != version {
		t.Errorf("%s: %s, %d packages, first %+v; want SPDX-2.3 naming %s %s by its SHA256", sbom, doc.SPDXVersion, len(doc.Packages), doc.Packages[0], bin, version)
	}

	// The .rpm: the same files and scripts as the .deb, and a version rpm
	// compares as dpkg does.
	want := []string{"/etc/idmint", "/etc/idmint/idmint.yaml", "/usr/bin/idmint", "/usr/lib/systemd/system/idmint.service",
		"/usr/share/doc/idmint/copyright", "/usr/share/doc/idmint/idmint.env.example"}
	rpmPath := filepath.Join(out, rpm)
	if got := strings.Fields(runOut(t, tools["rpm"], "-qlp", rpmPath)); !slices.Equal(got, want) {
		t.Errorf("rpm -qlp %s = %v, want %v", rpm, got, want)
	}
	if cfg := strings.Fields(runOut(t, tools["rpm"], "-qcp", rpmPath)); !slices.Equal(cfg, []string{"/etc/idmint/idmint.yaml"}) {
		t.Errorf("rpm -qcp %s: config files %v, want /etc/idmint/idmint.yaml", rpm, cfg)
	}
	if s := runOut(t, tools["rpm"], "-qp", "--scripts", rpmPath); !strings.Contains(s, "useradd --system") || !strings.Contains(s, "systemctl disable --now idmint.service") {
		t.Errorf("rpm --scripts of %s lacks the user creation or the stop on removal:\n%s", rpm, s)
	}

	// The .deb: installed, run, purged. An install a failed run left
	// behind goes first.
	installDeb(t, tools, filepath.Join(out, deb), version, func() string {
		next := release(t, filepath.Join(dir, "next"), "deb", "v99.0.0")
		for n := range next {
			if strings.HasSuffix(n, ".deb") {
				return filepath.Join(dir, "next", n)
			}
		}
		t.Fatalf("release.sh v99.0.0 wrote no .deb: %v", names(next))
		return ""
	})
}

// installDeb installs the .deb, checks what it set up, runs the packaged
// binary with the packaged config as the idmint user, takes IDs from it,
// upgrades to the package next builds (version v99.0.0), and purges.
func installDeb(t *testing.T, tools map[string]string, deb, version string, next func() string) {
	// What the package leaves by design (the data directory, the user)
	// goes too, so each run sees a first install.
	cleanInstall := func() {
		exec.Command(tools["dpkg"], "--purge", "idmint").Run()
		os.RemoveAll("/var/lib/idmint")
		exec.Command("userdel", "idmint").Run()
		exec.Command("groupdel", "idmint").Run()
	}
	cleanInstall()
	t.Cleanup(cleanInstall)
	start := time.Now()
	runOut(t, tools["dpkg"], "-i", deb)
	t.Logf("dpkg -i: %v", time.Since(start).Round(time.Millisecond))

	u, err := user.Lookup("idmint")
	if err != nil {
		t.Fatalf("after dpkg -i: no idmint user: %v", err)
	}
	if uid, _ := strconv.Atoi(u.Uid); uid == 0 || uid >= 1000 {
		t.Errorf("the idmint user has uid %s, want a system user's (1-999)", u.Uid)
	}
	if pw := runOut(t, "getent", "passwd", "idmint"); !strings.HasSuffix(strings.TrimSpace(pw), ":/usr/sbin/nologin") {
		t.Errorf("getent passwd idmint = %q, want the shell /usr/sbin/nologin", pw)
	}
	fi, err := os.Stat("/var/lib/idmint")
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); strconv.Itoa(int(st.Uid)) != u.Uid || fi.Mode() != os.ModeDir|0o750 {
		t.Errorf("/var/lib/idmint: owner %d mode %v, want %s (idmint) and drwxr-x---", st.Uid, fi.Mode(), u.Uid)
	}
	if cf := runOut(t, "dpkg-query", "-W", "-f=${Conffiles}", "idmint"); !strings.Contains(cf, "/etc/idmint/idmint.yaml ") {
		t.Errorf("dpkg conffiles %q: /etc/idmint/idmint.yaml is not a config file (an upgrade would overwrite it)", cf)
	}

	// The unit: the packaged binary and config, the idmint user, and its
	// ExecStart accepted by that binary (serve --check, as the user).
	unit := "/usr/lib/systemd/system/idmint.service"
	u2 := parseUnit(t, unit)
	execStart := strings.Fields(u2["ExecStart"][0])
	if execStart[0] != "/usr/bin/idmint" || !slices.Contains(u2["User"], "idmint") || len(u2["DynamicUser"]) != 0 ||
		!slices.Contains(u2["StateDirectory"], "idmint") || !slices.Contains(execStart, "/etc/idmint/idmint.yaml") {
		t.Errorf("%s: ExecStart=%v User=%v DynamicUser=%v StateDirectory=%v; want /usr/bin/idmint with /etc/idmint/idmint.yaml as User=idmint in StateDirectory=idmint",
			unit, execStart, u2["User"], u2["DynamicUser"], u2["StateDirectory"])
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	asIdmint := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, Setpgid: true}
	c := exec.Command(execStart[0], append(execStart[1:], "--check")...)
	c.SysProcAttr = asIdmint
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("the unit's ExecStart with --check, as the idmint user: %v\n%s", err, out)
	}
	// The unit passes systemd-analyze as deploy/systemd's does.
	analyzeUnit(t, tools["systemd-analyze"], unit, "/usr/bin/idmint", "usr/bin/idmint")

	// The packaged binary with the packaged config, as the idmint user
	// (what runuser -u idmint does, without a process between the test
	// and the server's exit status), on free ports: no systemd in a
	// container to start the unit.
	port, admin := testserver.FreePort(t), testserver.FreePort(t)
	c = exec.Command("/usr/bin/idmint", "serve", "--config", "/etc/idmint/idmint.yaml",
		"--listen", "127.0.0.1:"+strconv.Itoa(port), "--admin-listen", "127.0.0.1:"+strconv.Itoa(admin))
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/var/lib/idmint", "IDMINT_DRAIN_PERIOD=0s"}
	var log bytes.Buffer
	c.Stdout, c.Stderr = &log, &log
	c.SysProcAttr = asIdmint
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("packaged idmint's output:\n%s", log.String())
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	hc := &http.Client{Timeout: 5 * time.Second}
	testserver.Eventually(t, "the packaged idmint to answer /readyz", 60*time.Second, func() bool {
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for _, key := range []string{"snowflake", "seq", "uuid"} {
		body := get(t, hc, base+"/v1/keys/"+key+"/ids?count=3")
		var ids struct{ IDs []json.RawMessage }
		if err := json.Unmarshal(body, &ids); err != nil || len(ids.IDs) != 3 || bytes.Equal(ids.IDs[0], ids.IDs[1]) {
			t.Errorf("key %s: %s (%v), want 3 distinct IDs", key, body, err)
		}
	}
	if m := get(t, hc, "http://127.0.0.1:"+strconv.Itoa(admin)+"/metrics"); !bytes.Contains(m, []byte(`version="`+version+`"} 1`)) {
		t.Errorf("/metrics on the admin listener lacks idmint_build_info with version %s", version)
	}
	// What the node wrote is the idmint user's.
	db, err := os.Stat("/var/lib/idmint/segments.db")
	if err != nil {
		t.Errorf("the seq key left no SQLite store in /var/lib/idmint: %v", err)
	} else if st := db.Sys().(*syscall.Stat_t); strconv.Itoa(int(st.Uid)) != u.Uid {
		t.Errorf("/var/lib/idmint/segments.db is owned by uid %d, want idmint's %s", st.Uid, u.Uid)
	}
	syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Errorf("the packaged idmint exited with %v after SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the packaged idmint did not exit within 60 s of SIGTERM")
	}

	// Upgrade: the new binary, the operator's config and the data kept.
	// --force-confold is what a non-interactive upgrade answers when the
	// operator changed the config (interactively dpkg asks).
	const mark = "# changed by the operator\n"
	f, err := os.OpenFile("/etc/idmint/idmint.yaml", os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(mark)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, tools["dpkg"], "-i", "--force-confold", next())
	if v := runOut(t, "dpkg-query", "-W", "-f=${Version}", "idmint"); v != "99.0.0-1" {
		t.Errorf("after the upgrade dpkg has idmint %q, want 99.0.0-1", v)
	}
	if v := runOut(t, "/usr/bin/idmint", "version"); !strings.HasPrefix(v, "idmint v99.0.0 ") {
		t.Errorf("after the upgrade /usr/bin/idmint version = %q", v)
	}
	if b, err := os.ReadFile("/etc/idmint/idmint.yaml"); err != nil || !strings.HasSuffix(string(b), mark) {
		t.Errorf("the upgrade replaced the operator's /etc/idmint/idmint.yaml (%v)", err)
	}
	if _, err := os.Stat("/var/lib/idmint/segments.db"); err != nil {
		t.Errorf("the upgrade lost the data directory: %v", err)
	}

	// Purge: the package's files go; the data directory stays (it keeps
	// this host's IDs from repeating).
	runOut(t, tools["dpkg"], "--purge", "idmint")
	for _, p := range []string{"/usr/bin/idmint", unit, "/etc/idmint/idmint.yaml", "/usr/share/doc/idmint/idmint.env.example"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("after dpkg --purge: %s is still there (%v)", p, err)
		}
	}
	if _, err := os.Stat("/var/lib/idmint/segments.db"); err != nil {
		t.Errorf("dpkg --purge removed the data directory: %v", err)
	}
}

func get(t *testing.T, hc *http.Client, url string) []byte {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return b
}

// runOut runs a program and returns its output, failing the test on an error.
func runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkStatic fails the test when the ELF file needs a dynamic loader or
// shared libraries.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (it has an ELF interpreter)", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", path, libs)
	}
}
