package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestInterspersed(t *testing.T) {
	app := newApp()
	for _, c := range []struct{ in, want string }{
		{"mount ws mnt --daemon", "mount --daemon ws mnt"},
		{"mount ws --state-dir /s mnt -o ro", "mount --state-dir /s -o ro ws mnt"},
		{"mount ws mnt --cache-timeout=5s --watch=false", "mount --cache-timeout=5s --watch=false ws mnt"},
		{"mount --daemon ws mnt", "mount --daemon ws mnt"},
		{"status mnt --json", "status --json mnt"},
		{"agents --mount m ls", "agents --mount m ls"},
		{"agents ls --mount m", "agents ls --mount m"},
		{"agents spawn echo hi --mount m -s sh", "agents spawn --mount m -s sh echo hi"},
		{"agents steer 3 -- --not-a-flag text", "agents steer -- 3 --not-a-flag text"},
		{"compact append ID - --mount m", "compact append --mount m ID -"},
		{"ask --mount m -- -x?", "ask --mount m -- -x?"},
		// run: CMD and everything after it is CMD's.
		{"run --mount m -- sh -c x", "run --mount m -- sh -c x"},
		{"run --mount m ls -la --mount", "run --mount m -- ls -la --mount"},
		{"--version", "--version"},
		{"frob --x", "frob --x"},
		{"compact ls --generate-bash-completion", "compact ls --generate-bash-completion"},
	} {
		got := strings.Join(interspersed(app, append([]string{"rubinofs"}, strings.Fields(c.in)...))[1:], " ")
		if got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

// TestRunUsageErrors runs the CLI in this process on bad command lines: one
// line naming the option, exit status 2.
func TestRunUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", "ws", "mnt", "--bogus"}, "rubinofs mount: unknown flag --bogus; see 'rubinofs mount --help'"},
		{[]string{"mount", "-q", "ws", "mnt"}, "rubinofs mount: unknown flag -q; see 'rubinofs mount --help'"},
		{[]string{"--bogus"}, "rubinofs: unknown flag --bogus; see 'rubinofs --help'"},
		{[]string{"mount", "--cache-timeout", "5", "ws", "mnt"}, `rubinofs mount: --cache-timeout "5" is not a duration: write it with a unit, like "5s" or "500ms"`},
		{[]string{"mount", "--save-interval=0.5", "ws", "mnt"}, `rubinofs mount: --save-interval "0.5" is not a duration: write it with a unit, like "0.5s" or "500ms"`},
		{[]string{"mount", "--short-timeout", "soon", "ws", "mnt"}, `rubinofs mount: --short-timeout "soon" is not a duration: write it like "5s", "500ms" or "1h" (units ns, us, ms, s, m, h)`},
		{[]string{"mount", "--watch=maybe", "ws", "mnt"}, "rubinofs mount: --watch=maybe: a switch is true or false"},
		{[]string{"compact", "new", "--window", "big"}, `rubinofs compact new: --window "big" is not a whole number`},
		{[]string{"agents", "ls", "--mount"}, "rubinofs agents ls: --mount needs a value"},
		{[]string{"agents", "frob"}, `rubinofs agents: unknown command "frob"; see 'rubinofs agents --help'`},
		{[]string{"mount", "-o", "ro,nonsense", "ws", "mnt"}, "rubinofs: -o nonsense: unknown mount option; the FUSE options are allow_other, default_permissions"},
		{[]string{"mount", "-o", "cache_timeout=5s", "ws", "mnt"}, "(for the rubinofs option, write --cache-timeout)"},
		{[]string{"status", "a", "b"}, "usage: rubinofs status"},
	} {
		var stderr bytes.Buffer
		code := run(append([]string{"rubinofs"}, c.args...), &stderr)
		out := stderr.String()
		if code != exitUsage || !strings.Contains(out, c.want) || strings.Count(out, "\n") != 1 {
			t.Errorf("rubinofs %v: exit %d\n%s\nwant exit 2 and one line with %s", c.args, code, out, c.want)
		}
	}
}

func TestVersionOf(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.modified", Value: "true"},
	}}
	if got, want := versionOf(bi, "go1.26.1"), version+" (commit 0123456789ab-dirty, go1.26.1)"; got != want {
		t.Errorf("devel build: %q, want %q", got, want)
	}
	bi.Main.Version, bi.Settings[1].Value = "v1.2.3", "false"
	if got, want := versionOf(bi, "go1.26.1"), "v1.2.3 (commit 0123456789ab, go1.26.1)"; got != want {
		t.Errorf("tagged build: %q, want %q", got, want)
	}
	bi.Main.Version = "v0.0.0-20250102030405-0123456789ab+dirty"
	if got := versionOf(bi, "go1.26.1"); !strings.HasPrefix(got, version+" (commit 0123456789ab,") {
		t.Errorf("pseudo-version build: %q", got)
	}
	if got, want := versionOf(nil, "go1.26.1"), version+" (commit unknown, go1.26.1)"; got != want {
		t.Errorf("no build info: %q, want %q", got, want)
	}
}

func TestFormatStatusDurations(t *testing.T) {
	doc := map[string]any{"uptime_s": float64(3723.4), "watcher": map[string]any{
		"short_timeout_ns": float64(time.Second), "last_invalidation_ns": float64(1500 * time.Microsecond),
		"unwatched": nil, "watches": float64(3)}}
	out := formatStatus("/m", doc)
	for _, want := range []string{"up 1h2m3s\n", "  short_timeout: 1s\n", "  last_invalidation: 1.5ms\n", "  unwatched: none\n", "  watches: 3\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "_ns") {
		t.Errorf("status shows a raw nanosecond key:\n%s", out)
	}
}

func TestCheckFuseOption(t *testing.T) {
	for _, ok := range []string{"", "ro", "rw", "allow_other", "nosuid"} {
		if err := checkFuseOption(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	err := checkFuseOption("mode=warn")
	if err == nil || !strings.Contains(err.Error(), "-o mode=warn") || !strings.Contains(err.Error(), "--mode") {
		t.Errorf("mode=warn: %v", err)
	}
}

func TestNotInsideMountNamesFlag(t *testing.T) {
	t.Setenv("RUBINO_MOUNT", "")
	t.Chdir(t.TempDir())
	_, err := findMount("")
	if err == nil || !strings.Contains(err.Error(), "--mount DIR") {
		t.Fatalf("findMount outside a mount: %v", err)
	}
	// Every command that reaches findMount has the flag it names.
	for _, path := range [][]string{{"status"}, {"run"}, {"agents", "ls"}, {"compact", "ls"}, {"ask"}, {"inbox"}} {
		cmds := newApp().Commands
		cmd := findCommand(cmds, path[0])
		for _, p := range path[1:] {
			cmd = findCommand(cmd.Subcommands, p)
		}
		if lookupFlag(cmd, "--mount") == nil {
			t.Errorf("rubinofs %s has no --mount", strings.Join(path, " "))
		}
	}

}
