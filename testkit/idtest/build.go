package idtest

import (
	"os"
	"os/exec"
)

// BuildCommand returns the go build of cmd/idmint into out that the tests
// share: static (CGO_ENABLED=0) and -trimpath, as the Dockerfile builds it,
// so the deployment test's build of the Dockerfile's own command finds
// every package compiled already in the build cache (the link differs only
// in its -ldflags).
func BuildCommand(out string) *exec.Cmd {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/idmint/idmint/cmd/idmint")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}
