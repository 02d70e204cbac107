package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestDocument: the SBOM of a Go binary (this test's own) is SPDX 2.3 with
// the fields the specification requires, names the binary by its SHA-256,
// lists the standard library it was built with, relates every package to
// the document, and comes out byte for byte the same twice.
func TestDocument(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	for _, w := range []*bytes.Buffer{&a, &b} {
		if err := run([]string{"-created", "1700000000", "-version", "v1.2.3", "-name", "idmint-v1.2.3-linux-amd64", bin}, w); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two runs on the same binary wrote different documents")
	}
	var doc spdxDocument
	if err := json.Unmarshal(a.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" ||
		doc.Name != "idmint-v1.2.3-linux-amd64" || !strings.HasPrefix(doc.DocumentNamespace, "https://") ||
		doc.CreationInfo.Created != "2023-11-14T22:13:20Z" || len(doc.CreationInfo.Creators) == 0 {
		t.Errorf("document header %+v", doc)
	}
	if len(doc.Packages) < 2 {
		t.Fatalf("%d packages, want the binary and the standard library at least", len(doc.Packages))
	}
	main := doc.Packages[0]
	if main.VersionInfo != "v1.2.3" || len(main.Checksums) != 1 || main.Checksums[0].Algorithm != "SHA256" ||
		main.Checksums[0].ChecksumValue != hex.EncodeToString(sum[:]) || main.PackageFileName != filepath.Base(bin) {
		t.Errorf("the binary's package %+v, want version v1.2.3 and SHA256 %x", main, sum)
	}
	std := doc.Packages[1]
	if std.Name != "stdlib" || std.VersionInfo != runtime.Version() || len(std.ExternalRefs) != 1 ||
		std.ExternalRefs[0].ReferenceLocator != "pkg:golang/stdlib@"+runtime.Version() {
		t.Errorf("the standard library's package %+v", std)
	}
	ids := map[string]bool{}
	idRE := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	for _, p := range doc.Packages {
		if !idRE.MatchString(p.SPDXID) || ids[p.SPDXID] {
			t.Errorf("package %s: SPDXID %q is malformed or not unique", p.Name, p.SPDXID)
		}
		ids[p.SPDXID] = true
		if p.DownloadLocation == "" || p.FilesAnalyzed {
			t.Errorf("package %s: downloadLocation %q filesAnalyzed %v", p.Name, p.DownloadLocation, p.FilesAnalyzed)
		}
	}
	related := map[string]bool{}
	for _, r := range doc.Relationships {
		if !ids[r.RelatedSPDXElement] || (r.SPDXElementID != "SPDXRef-DOCUMENT" && !ids[r.SPDXElementID]) {
			t.Errorf("relationship %+v names an unknown element", r)
		}
		related[r.RelatedSPDXElement] = true
	}
	for id := range ids {
		if !related[id] {
			t.Errorf("package %s is related to nothing", id)
		}
	}
}

// TestBadInput: each mistake is an error naming what was wrong.
func TestBadInput(t *testing.T) {
	notGo := filepath.Join(t.TempDir(), "notgo")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-created", "1"}, "want one binary"},
		{[]string{"-created", "yesterday", notGo}, `-created "yesterday"`},
		{[]string{notGo}, `-created ""`},
		{[]string{"-created", "1", notGo}, notGo + ": no Go build information"},
		{[]string{"-created", "1", notGo + ".missing"}, "notgo.missing"},
	} {
		err := run(c.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sbom %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
