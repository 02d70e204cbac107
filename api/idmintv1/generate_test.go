package idmintv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed Go code of the gRPC API is what api/generate.sh makes of
// idmint.proto with the plugins pinned in go.mod: a .proto edited without
// regenerating, or a file edited by hand, fails here.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("protoc not found; under CI=true the generated code must be checked (scripts/test.sh installs protobuf-compiler)")
		}
		t.Skip("protoc not found: apt-get install protobuf-compiler, or run bash scripts/test.sh, which installs it")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "generate.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("api/generate.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"idmint.pb.go", "idmint_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, "idmintv1", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s is not committed: run bash api/generate.sh (%v)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("api/idmintv1/%s is stale: it differs from what api/generate.sh generates from idmint.proto; run bash api/generate.sh", name)
		}
	}
	// No other generated file lies beside them (the hand-written glue
	// this replaced, say).
	matches, _ := filepath.Glob("*_grpc*.go")
	for _, m := range matches {
		if m != "idmint_grpc.pb.go" {
			t.Errorf("%s: service glue that api/generate.sh does not write", m)
		}
	}
}
