// Command sbom writes the software bill of materials of a Go binary as an
// SPDX 2.3 JSON document: the binary itself (with its SHA-256), the Go
// standard library it was built with, and every module linked into it,
// each with its version and package URL. scripts/release.sh runs it on
// each release binary:
//
//	go run ./scripts/sbom -created $SOURCE_DATE_EPOCH -version v1.2.3 dist/idmint-linux-amd64 > dist/idmint-linux-amd64.spdx.json
//
// Everything comes from the build information the Go toolchain records in
// the binary (debug/buildinfo, readable for any GOOS/GOARCH) and from the
// flags: the same binary and flags give the same bytes, so a release stays
// reproducible.
//
// The document's layout follows the SPDX 2.3 specification
// (spdx.github.io/spdx-spec/v2.3): clause 6 (creation information:
// spdxVersion, dataLicense CC0-1.0, SPDXID SPDXRef-DOCUMENT, name,
// documentNamespace, creationInfo), clause 7 (packages; filesAnalyzed
// false, so no verification code is needed), clause 11 (relationships),
// and Annex F for the package URLs (purl type "golang").
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	created := fs.String("created", "", "the document's creation time, Unix seconds (SOURCE_DATE_EPOCH); required, so two runs agree")
	version := fs.String("version", "", "the binary's version (default: the main module's version in its build information)")
	name := fs.String("name", "", "the document's name (default: the binary's file name)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one binary, got %d arguments (%q)", fs.NArg(), fs.Args())
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil || secs < 0 {
		return fmt.Errorf("-created %q: want Unix seconds (e.g. $(git log -1 --format=%%ct))", *created)
	}
	doc, err := document(fs.Arg(0), time.Unix(secs, 0), *version, *name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// The SPDX 2.3 JSON fields this command writes (a subset of the schema).
type (
	spdxDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreationInfo   `json:"creationInfo"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	spdxPackage struct {
		Name                  string            `json:"name"`
		SPDXID                string            `json:"SPDXID"`
		VersionInfo           string            `json:"versionInfo,omitempty"`
		PackageFileName       string            `json:"packageFileName,omitempty"`
		DownloadLocation      string            `json:"downloadLocation"`
		FilesAnalyzed         bool              `json:"filesAnalyzed"`
		Checksums             []spdxChecksum    `json:"checksums,omitempty"`
		ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
		PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
		Comment               string            `json:"comment,omitempty"`
	}
	spdxChecksum struct {
		Algorithm     string `json:"algorithm"`
		ChecksumValue string `json:"checksumValue"`
	}
	spdxExternalRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		SPDXElementID      string `json:"spdxElementId"`
		RelationshipType   string `json:"relationshipType"`
		RelatedSPDXElement string `json:"relatedSpdxElement"`
	}
)

// noAssertion is SPDX's "the creator makes no assertion" value.
const noAssertion = "NOASSERTION"

func document(path string, created time.Time, version, name string) (*spdxDocument, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: no Go build information: %v", path, err)
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	if name == "" {
		name = filepath.Base(path)
	}
	if version == "" {
		version = bi.Main.Version
	}
	doc := &spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        name,
		// Unique per binary: the binary's own hash (clause 6.5 asks for
		// a URI unique to this document).
		DocumentNamespace: "https://github.com/idmint/idmint/spdx/" + name + "-" + hexSum,
		CreationInfo: spdxCreationInfo{
			Created:  created.UTC().Format("2006-01-02T15:04:05Z"),
			Creators: []string{"Tool: idmint-scripts-sbom", "Organization: idmint"},
		},
	}
	mainID := "SPDXRef-Package-" + spdxIDPart(bi.Path)
	var settings []string
	for _, s := range bi.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		Name:                  bi.Path,
		SPDXID:                mainID,
		VersionInfo:           version,
		PackageFileName:       filepath.Base(path),
		DownloadLocation:      noAssertion,
		Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hexSum}},
		ExternalRefs:          purl(bi.Main.Path, version),
		PrimaryPackagePurpose: "APPLICATION",
		Comment:               "Go main package of module " + bi.Main.Path + ", built by " + bi.GoVersion + " with " + strings.Join(settings, " "),
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", mainID})
	add := func(name, version, comment string, refs []spdxExternalRef) {
		id := fmt.Sprintf("SPDXRef-Package-%d-%s", len(doc.Packages), spdxIDPart(name))
		doc.Packages = append(doc.Packages, spdxPackage{
			Name: name, SPDXID: id, VersionInfo: version, DownloadLocation: noAssertion,
			ExternalRefs: refs, PrimaryPackagePurpose: "LIBRARY", Comment: comment,
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", id})
	}
	add("stdlib", bi.GoVersion, "the Go standard library", []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + bi.GoVersion}})
	for _, d := range bi.Deps {
		m, comment := d, "Go module linked into the binary"
		if d.Replace != nil {
			m = d.Replace
			comment += ", replacing " + d.Path + "@" + d.Version
		}
		if m.Sum != "" {
			comment += "; go.sum hash " + m.Sum
		}
		add(m.Path, m.Version, comment, purl(m.Path, m.Version))
	}
	return doc, nil
}

// purl is a Go module's package URL, pkg:golang/PATH@VERSION (the purl
// specification's "golang" type); none for a version the toolchain did not
// know ("(devel)", a local replacement).
func purl(path string, version string) []spdxExternalRef {
	if version == "" || version == "(devel)" || !strings.HasPrefix(version, "v") {
		return nil
	}
	return []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}}
}

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxIDPart makes s fit an SPDX identifier: letters, digits, "." and "-"
// (clause 7.2).
func spdxIDPart(s string) string { return notIDChar.ReplaceAllString(s, "-") }
