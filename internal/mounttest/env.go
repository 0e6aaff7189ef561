package mounttest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Env is a minimal, reproducible environment for tools run in a mount: no
// user git config, a fixed identity for commits, home as HOME, this
// process's TMPDIR, PATH and GOFLAGS, and the go command's own paths and
// proxy (asked once per process).
func Env(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + os.TempDir(),
		"LANG=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=rubinofs test", "GIT_AUTHOR_EMAIL=test@rubinofs.invalid",
		"GIT_COMMITTER_NAME=rubinofs test", "GIT_COMMITTER_EMAIL=test@rubinofs.invalid",
		"GOFLAGS=" + os.Getenv("GOFLAGS"),
		"GOPATH=" + goEnv("GOPATH"),
		"GOMODCACHE=" + goEnv("GOMODCACHE"),
		"GOCACHE=" + goEnv("GOCACHE"),
		"GOPROXY=" + goEnv("GOPROXY"),
	}
}

var (
	goEnvMu    sync.Mutex
	goEnvCache = map[string]string{}
)

// goEnv is `go env key`, asked once per process ("" when it fails).
func goEnv(key string) string {
	goEnvMu.Lock()
	defer goEnvMu.Unlock()
	if v, ok := goEnvCache[key]; ok {
		return v
	}
	out, err := exec.Command("go", "env", key).Output()
	v := ""
	if err == nil {
		v = strings.TrimSpace(string(out))
	}
	goEnvCache[key] = v
	return v
}

// CLIPackage is the import path of the rubinofs command.
const CLIPackage = "github.com/rubinofs/rubinofs/cmd/rubinofs"

// BuildCLI builds the rubinofs command of this module (CLIPackage) to the
// file out with `go build`; run it from inside the module (a test's
// package directory, or the repository root). The error carries go
// build's output.
func BuildCLI(out string) error {
	if b, err := exec.Command("go", "build", "-o", out, CLIPackage).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", CLIPackage, err, b)
	}
	return nil
}
