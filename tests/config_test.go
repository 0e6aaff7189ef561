package tests

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cfgEnv is the environment of a config test's rubinofs process: its own
// XDG_CONFIG_HOME (so no real user file is read) and no RUBINOFS_* config
// overrides.
func cfgEnv(xdg string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "XDG_CONFIG_HOME=") || strings.HasPrefix(kv, "RUBINOFS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "XDG_CONFIG_HOME="+xdg)
}

// TestCLIConfigShow: `rubinofs config show` prints every value with its
// source (default, user file with line, workspace file with line, flag),
// in TOML and JSON; a workspace file that loosens the guard and an unknown
// key are clear errors naming file, line and key.
func TestCLIConfigShow(t *testing.T) {
	tmp := t.TempDir()
	xdg, ws := filepath.Join(tmp, "xdg"), filepath.Join(tmp, "ws")
	for _, d := range []string{filepath.Join(xdg, "rubinofs"), ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	user := filepath.Join(xdg, "rubinofs", "config.toml")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(user, "[guard]\nmode = \"warn\"\nerrno = \"EPERM\"\n")
	write(filepath.Join(ws, ".rubino.toml"), "# tighten\n[guard]\nmode = \"enforce\"\n[compact]\nthreshold = 0.7\n")
	env := cfgEnv(xdg)
	state := filepath.Join(tmp, "state")

	out, err := runCLI(t, "", env, "config", "show", "--state-dir", state, "--short-timeout", "3s", ws)
	if err != nil {
		t.Fatalf("config show: %v\n%s", err, out)
	}
	for _, want := range []string{
		"mode = \"enforce\"", "# from workspace file " + filepath.Join(ws, ".rubino.toml") + ":3",
		"errno = \"EPERM\"", "# from user file " + user + ":3",
		"threshold = 0.7", ":5",
		"short_timeout = \"3s\"", "# from flag --short-timeout",
		"unlink = \"guard\"", "# from default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config show lacks %q:\n%s", want, out)
		}
	}

	out, err = runCLI(t, "", env, "config", "show", "--json", "--state-dir", state, ws)
	if err != nil {
		t.Fatalf("config show --json: %v\n%s", err, out)
	}
	var entries []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
		From  string `json:"from"`
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("config show --json is not JSON: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Key] = e.From
	}
	if got["guard.mode"] != "workspace file "+filepath.Join(ws, ".rubino.toml")+":3" || got["guard.errno"] != "user file "+user+":3" || got["guard.unlink"] != "default" {
		t.Errorf("json sources: %v", got)
	}

	// --config replaces the XDG user file.
	other := filepath.Join(tmp, "other.toml")
	write(other, "[guard]\nunlink = \"allow\"\n")
	out, err = runCLI(t, "", env, "config", "show", "--config", other, "--state-dir", state, ws)
	if err != nil || !strings.Contains(out, "# from user file "+other+":2") || strings.Contains(out, user) {
		t.Errorf("config show --config: %v\n%s", err, out)
	}

	// A loosening workspace file is refused, naming file, line and key.
	write(filepath.Join(ws, ".rubino.toml"), "[guard]\n\nunlink = \"allow\"\n")
	out, err = runCLI(t, "", env, "config", "show", "--state-dir", state, ws)
	if err == nil || !strings.Contains(out, filepath.Join(ws, ".rubino.toml")+":3: guard.unlink = \"allow\" would loosen the guard") {
		t.Errorf("loosening workspace file: %v\n%s", err, out)
	}
	// An unknown key is an error with its line.
	write(filepath.Join(ws, ".rubino.toml"), "[guard]\nmode = \"enforce\"\nmdoe = \"warn\"\n")
	out, err = runCLI(t, "", env, "config", "show", "--state-dir", state, ws)
	if err == nil || !strings.Contains(out, ".rubino.toml:3: unknown key guard.mdoe") {
		t.Errorf("unknown key: %v\n%s", err, out)
	}
	// So is mounting with it: nothing is mounted.
	mnt := filepath.Join(tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	out, err = runCLI(t, "", env, "mount", "--state-dir", state, ws, mnt)
	if err == nil || !strings.Contains(out, "unknown key guard.mdoe") {
		t.Errorf("mount with a bad workspace file: %v\n%s", err, out)
	}
	if isMounted(t, mnt) {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		t.Fatal("mounted despite a bad config file")
	}
}

// TestCLIConfigMount mounts through the CLI with a user file that sets
// mode = "warn" and errno = "EPERM", and the flag --mode enforce: the flag
// wins (a blind overwrite is refused, not merely logged) and the refusal
// is EPERM ("Operation not permitted"), with the file intact.
func TestCLIConfigMount(t *testing.T) {
	requireFuse(t)
	tmp := t.TempDir()
	xdg, ws, mnt, state := filepath.Join(tmp, "xdg"), filepath.Join(tmp, "ws"), filepath.Join(tmp, "mnt"), filepath.Join(tmp, "state")
	for _, d := range []string{xdg, ws, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	user := filepath.Join(tmp, "user.toml")
	if err := os.WriteFile(user, []byte("[guard]\nmode = \"warn\"\nerrno = \"EPERM\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// In the foreground; the cleanup stops it with SIGTERM and waits.
	startForeground(t, "", cfgEnv(xdg), true, "--config", user, "--mode", "enforce", "--state-dir", state, ws, mnt)

	if mode := readStatus(t, mnt)["mode"]; mode != "enforce" {
		t.Fatalf("status: mode %v, want enforce", mode)
	}
	out, err := exec.Command("sh", "-c", "echo blind > "+filepath.Join(mnt, "f")).CombinedOutput()
	if err == nil {
		t.Fatalf("blind overwrite allowed (the flag --mode enforce did not override the file's warn): %s", out)
	}
	if !strings.Contains(string(out), "Operation not permitted") {
		t.Fatalf("blind overwrite refused with %q, want EPERM (Operation not permitted)", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "original\n" {
		t.Fatalf("file changed by a refused write: %q", b)
	}
	// The errno reaches a direct syscall too.
	_, err = os.OpenFile(filepath.Join(mnt, "f"), os.O_WRONLY|os.O_TRUNC, 0)
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("O_TRUNC open: %v, want EPERM", err)
	}
	// After a read, the edit passes.
	if _, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", "cat "+filepath.Join(mnt, "f")+" >/dev/null && echo edited > "+filepath.Join(mnt, "f")).CombinedOutput(); err != nil {
		t.Fatalf("edit after a read: %v %s", err, out)
	}
}
