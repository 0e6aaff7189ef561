package tests

// The CLI's conventions, as sshfs, rclone and gocryptfs users expect them:
// flags anywhere before `--`, one-line usage errors naming the option (exit
// 2), nothing created before every argument is checked, one mount per state
// directory, warn mode that says what it did, one version line, and
// durations for people. Each test drives the real binary (cli_test.go).

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountArgs runs `rubinofs ARGS...` in m.tmp, which must mount m (with
// --daemon), fails the test unless it exits 0, and tracks the daemon's pid.
func (m *cliMount) mountArgs(args ...string) string {
	m.t.Helper()
	out, code := cliCode(m.t, m.tmp, args...)
	if code != 0 {
		m.t.Fatalf("rubinofs %v: exit %d\n%s", args, code, out)
	}
	sm := daemonPidRe.FindStringSubmatch(out)
	if sm == nil {
		m.t.Fatalf("no daemon pid in %q", out)
	}
	pid, _ := strconv.Atoi(sm[1])
	m.track(pid)
	return out
}

// oneLine fails the test unless out is exactly one line holding every want.
func oneLine(t *testing.T, what, out string, want ...string) {
	t.Helper()
	if n := strings.Count(strings.TrimRight(out, "\n"), "\n"); n != 0 {
		t.Errorf("%s: %d lines, want one:\n%s", what, n+1, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// TestCLIFlagsAfterPositionals: flags may follow the positional arguments
// of every subcommand, as sshfs and rclone take them, and a flag-looking
// word after `--` stays an argument.
func TestCLIFlagsAfterPositionals(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	out := m.mountArgs("mount", m.ws, m.mnt, "--daemon", "--state-dir", m.state, "--mode=warn")
	if !strings.Contains(out, "mounted") {
		t.Fatalf("mount WS MNT --daemon: %s", out)
	}
	if mode := m.status()["mode"]; mode != "warn" {
		t.Errorf("mode %v after a trailing --mode=warn", mode)
	}
	if out, err := cli(t, m.tmp, "status", m.mnt, "--json"); err != nil || !strings.HasPrefix(out, "{") {
		t.Errorf("status MNT --json: %v\n%s", err, out)
	}
	if out, err := cli(t, m.tmp, "agents", "ls", "--mount", m.mnt); err != nil || !strings.Contains(out, "no tasks") {
		t.Errorf("agents ls --mount MNT: %v\n%s", err, out)
	}
	// compact new, then append ID FILE --mount MNT: the flag after both
	// positionals.
	id, err := cli(t, m.tmp, "compact", "new", "--mount", m.mnt)
	id = strings.TrimSpace(id)
	if err != nil {
		t.Fatalf("compact new: %v %s", err, id)
	}
	msgs := filepath.Join(m.tmp, "msgs.jsonl")
	os.WriteFile(msgs, []byte(`{"role":"user","content":"hello"}`+"\n"), 0o644)
	if out, err := cli(t, m.tmp, "compact", "append", id, msgs, "--mount", m.mnt); err != nil {
		t.Errorf("compact append ID FILE --mount MNT: %v\n%s", err, out)
	}
	// After --, a flag-looking word is CMD's argument; so is every word
	// after CMD (rubinofs run passes them through untouched).
	out, err = cli(t, m.tmp, "run", "--mount", m.mnt, "--", "echo", "--mount", "-x")
	if err != nil || strings.TrimSpace(out) != "--mount -x" {
		t.Errorf("run -- echo --mount -x: %v %q", err, out)
	}
	out, err = cli(t, m.tmp, "run", "--mount", m.mnt, "echo", "--session", "s")
	if err != nil || strings.TrimSpace(out) != "--session s" {
		t.Errorf("run echo --session s: %v %q", err, out)
	}
	m.unmount()
}

// TestCLIMountFlagOnParent: --mount given before the subcommand (`agents
// --mount DIR ls`) names the mount, as it does after it.
func TestCLIMountFlagOnParent(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	m.mountDaemon()
	elsewhere := t.TempDir() // not inside the mount: only --mount can name it
	if out, err := cli(t, elsewhere, "agents", "--mount", m.mnt, "ls"); err != nil || !strings.Contains(out, "no tasks") {
		t.Errorf("agents --mount MNT ls: %v\n%s", err, out)
	}
	if out, err := cli(t, elsewhere, "compact", "--mount", m.mnt, "ls"); err != nil {
		t.Errorf("compact --mount MNT ls: %v\n%s", err, out)
	}
	// The parent's --mount is used, not ignored: a wrong one fails.
	if out, err := cli(t, elsewhere, "agents", "--mount", elsewhere, "ls"); err == nil || !strings.Contains(out, "not a rubinofs mount") {
		t.Errorf("agents --mount NOT-A-MOUNT ls: %v\n%s", err, out)
	}
	m.unmount()
}

// TestCLIStatusMountFlag: outside a mount, status says to give --mount, and
// --mount works for it as for every other subcommand.
func TestCLIStatusMountFlag(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	m.mountDaemon()
	elsewhere := t.TempDir()
	cmd := cliCommand(t, elsewhere, append(testEnv(elsewhere), "RUBINO_MOUNT="), "status")
	out, err := runCombined(t, cmd)
	if err == nil || !strings.Contains(out, "--mount DIR") {
		t.Fatalf("status outside a mount: %v\n%s", err, out)
	}
	if out, err := cli(t, elsewhere, "status", "--mount", m.mnt); err != nil || !strings.Contains(out, "mount:      "+m.mnt) {
		t.Errorf("status --mount MNT: %v\n%s", err, out)
	}
	m.unmount()
}

// TestCLIUsageErrors: an unknown flag or command, a duration without its
// unit and an unknown -o option are one line naming the option and what to
// do, with exit status 2, for every subcommand; and they create nothing.
func TestCLIUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	ws := makeWorkspace(t, tmp, map[string]string{"f": "x\n"})
	mnt := filepath.Join(tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	state := filepath.Join(tmp, "state")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"mount", "--bogus", ws, mnt}, []string{"unknown flag --bogus", "see 'rubinofs mount --help'"}},
		{[]string{"mount", ws, mnt, "--bogus"}, []string{"unknown flag --bogus", "see 'rubinofs mount --help'"}},
		{[]string{"agents", "ls", "--bogus"}, []string{"unknown flag --bogus", "see 'rubinofs agents ls --help'"}},
		{[]string{"compact", "--bogus", "ls"}, []string{"unknown flag --bogus", "see 'rubinofs compact --help'"}},
		{[]string{"status", "-z"}, []string{"unknown flag -z", "see 'rubinofs status --help'"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "see 'rubinofs --help'"}},
		{[]string{"mount", "--cache-timeout", "5", ws, mnt}, []string{`--cache-timeout "5" is not a duration`, `"5s"`}},
		{[]string{"mount", "--short-timeout=2", ws, mnt}, []string{`--short-timeout "2" is not a duration`, `"2s"`}},
		{[]string{"mount", "--save-interval", "1 minute", ws, mnt}, []string{`--save-interval "1 minute" is not a duration`, `"500ms"`}},
		{[]string{"mount", "--max-watches", "many", ws, mnt}, []string{`--max-watches "many" is not a whole number`}},
		{[]string{"mount", "--daemon", "--state-dir", state, "-o", "nonsense", ws, mnt}, []string{"-o nonsense", "unknown mount option", "allow_other"}},
		{[]string{"mount", "--daemon", "--state-dir", state, "-o", "mode=warn", ws, mnt}, []string{"-o mode=warn", "--mode"}},
		{[]string{"mount", "--state-dir"}, []string{"--state-dir needs a value"}},
	} {
		out, code := cliCode(t, tmp, c.args...)
		if code != 2 {
			t.Errorf("rubinofs %v: exit %d, want 2 (usage error)\n%s", c.args, code, out)
		}
		oneLine(t, "rubinofs "+strings.Join(c.args, " "), out, c.want...)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("a refused mount created its state directory %s: %v", state, err)
	}
	if isMounted(t, mnt) {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		t.Fatal("a refused mount mounted")
	}
}

// TestCLIMountCreatesNothingOnBadArgs: a missing workspace or mountpoint
// is refused before the state directory or its log is created, with
// --daemon or without.
func TestCLIMountCreatesNothingOnBadArgs(t *testing.T) {
	tmp := t.TempDir()
	ws := makeWorkspace(t, tmp, nil)
	mnt := filepath.Join(tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	for i, c := range []struct {
		args []string
		want string
	}{
		{[]string{filepath.Join(tmp, "nope"), mnt}, "workspace"},
		{[]string{ws, filepath.Join(tmp, "nope")}, "does not exist"},
	} {
		for _, daemonFlag := range []string{"--daemon", "--daemon=false"} {
			state := filepath.Join(tmp, "state"+strconv.Itoa(i)+daemonFlag)
			args := append([]string{"mount", daemonFlag, "--state-dir", state}, c.args...)
			out, code := cliCode(t, tmp, args...)
			if code == 0 || !strings.Contains(out, c.want) {
				t.Errorf("rubinofs %v: exit %d, want an error about %q\n%s", args, code, c.want, out)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("rubinofs %v created %s: %v", args, state, err)
			}
		}
	}
}

// TestCLIMountRelativeStateDir: a relative --state-dir (and --config) is
// taken from the working directory, as gocryptfs and rclone take theirs,
// with --daemon too (whose daemon runs in /).
func TestCLIMountRelativeStateDir(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	os.WriteFile(filepath.Join(m.tmp, "user.toml"), []byte("[guard]\nmode = \"warn\"\n"), 0o644)
	m.mountArgs("mount", "--daemon", "--state-dir", "rel/state", "--config", "user.toml", m.ws, m.mnt)
	want := filepath.Join(m.tmp, "rel", "state")
	st, _ := m.status()["state"].(map[string]any)
	if st["dir"] != want {
		t.Errorf("state.dir = %v, want %s", st["dir"], want)
	}
	if _, err := os.Stat(filepath.Join(want, "rubinofs.log")); err != nil {
		t.Errorf("no log in the relative state directory: %v", err)
	}
	if mode := m.status()["mode"]; mode != "warn" {
		t.Errorf("mode %v: the relative --config was not read", mode)
	}
	m.unmount()
}

// TestCLIMountStateDirLock: a second mount of a workspace with the state
// directory of a live mount is refused before mounting, naming --state-dir
// and the pid holding it, and leaves that mount's log alone; with its own
// --state-dir it works beside the first (as two hosts share a network
// filesystem). A mount killed with SIGKILL frees its state directory.
func TestCLIMountStateDirLock(t *testing.T) {
	tmp := t.TempDir()
	ws := makeWorkspace(t, tmp, map[string]string{"f": "x\n"})
	state := filepath.Join(tmp, "state")
	a := newCLIMount(t, filepath.Join(tmp, "a"), ws, state)
	b := cliMountAt(t, filepath.Join(tmp, "b"), ws, state)
	logBefore, _ := os.ReadFile(filepath.Join(state, "rubinofs.log"))
	out, code := cliCode(t, b.tmp, "mount", "--daemon", "--state-dir", state, ws, b.mnt)
	if code == 0 {
		b.adopt()
		t.Fatalf("a second mount with the same --state-dir succeeded:\n%s", out)
	}
	oneLine(t, "second mount", out, "--state-dir "+state, "pid "+strconv.Itoa(a.pid))
	if b.mounted() {
		t.Fatal("the refused mount is mounted")
	}
	if logAfter, _ := os.ReadFile(filepath.Join(state, "rubinofs.log")); string(logAfter) != string(logBefore) {
		t.Errorf("the refused mount wrote to the first mount's log:\n%s", logAfter[len(logBefore):])
	}
	// Foreground too.
	if out, code := cliCode(t, b.tmp, "mount", "--state-dir", state, ws, b.mnt); code == 0 || !strings.Contains(out, "--state-dir") {
		t.Fatalf("a second foreground mount with the same --state-dir: exit %d\n%s", code, out)
	}
	// Its own state directory: both mounts serve the workspace.
	b.state = filepath.Join(tmp, "state-b")
	b.mountDaemon()
	for _, m := range []*cliMount{a, b} {
		if got, err := os.ReadFile(m.path("f")); err != nil || string(got) != "x\n" {
			t.Errorf("reading f through %s: %q %v", m.mnt, got, err)
		}
	}
	// kill -9 frees the lock: a new mount takes the state directory over.
	a.kill9()
	a.mountDaemon()
	if pid := a.status()["pid"]; pid != float64(a.pid) {
		t.Errorf("status pid %v, want the new daemon %d", pid, a.pid)
	}
	a.unmount()
	b.unmount()
}

// TestCLIWarnModeSaysAllowed: in warn mode a would-be refusal is logged at
// level warn (so --log-level warn shows it) and worded as allowed, in the
// log, guard/why and guard/denials; none says "refusing".
func TestCLIWarnModeSaysAllowed(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	m.mountDaemon("--mode", "warn", "--log-level", "warn")
	out, err := cli(t, m.tmp, "run", "--mount", m.mnt, "--", "sh", "-c",
		`echo blind > "$RUBINO_MOUNT/f" && cat "$RUBINO_MOUNT/.rubino/guard/why"`)
	if err != nil {
		t.Fatalf("a blind write in warn mode: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(m.ws, "f")); string(b) != "blind\n" {
		t.Fatalf("f = %q: the warn-mode write did not go through", b)
	}
	if !strings.Contains(out, "would refuse (warn mode, allowed)") || strings.Contains(out, "refusing") {
		t.Errorf("guard/why after an allowed write:\n%s", out)
	}
	den, _ := os.ReadFile(m.path(".rubino/guard/denials"))
	if !strings.Contains(string(den), "would refuse (warn mode, allowed)") || strings.Contains(string(den), "refusing") {
		t.Errorf("guard/denials:\n%s", den)
	}
	logPath := filepath.Join(m.state, "rubinofs.log")
	waitFor(t, "the warn-mode record in the log", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "would refuse")
	})
	b, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "would refuse") && (!strings.Contains(line, "level=WARN") || !strings.Contains(line, "allowed")) {
			t.Errorf("warn-mode record: %s", line)
		}
	}
	m.unmount()
}

// TestCLIVersion: `version` and `--version` print one and the same line
// with the version, the commit the binary was built from (as its build
// information records it) and the Go release.
func TestCLIVersion(t *testing.T) {
	tmp := t.TempDir()
	v1, err1 := cli(t, tmp, "version")
	v2, err2 := cli(t, tmp, "--version")
	if err1 != nil || err2 != nil || v1 != v2 {
		t.Fatalf("version %q (%v) and --version %q (%v) differ", v1, err1, v2, err2)
	}
	m := regexp.MustCompile(`^rubinofs v\d+\.\d+\.\d+\S* \(commit (\S+), (go\S+)\)\n$`).FindStringSubmatch(v1)
	if m == nil {
		t.Fatalf("version line %q", v1)
	}
	info, err := exec.Command("go", "version", "-m", rubinofsBin(t)).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	commit := "unknown"
	if sm := regexp.MustCompile(`vcs\.revision=([0-9a-f]{12})`).FindSubmatch(info); sm != nil {
		commit = string(sm[1])
		if strings.Contains(string(info), "vcs.modified=true") {
			commit += "-dirty"
		}
	}
	if m[1] != commit {
		t.Errorf("commit %s, want %s (from the build information)", m[1], commit)
	}
	if gv := strings.Fields(string(info))[1]; m[2] != gv {
		t.Errorf("Go release %s, want %s", m[2], gv)
	}
}

// TestCLIStatusDurations: status prints durations as durations (1s, not
// 1000000000 nanoseconds).
func TestCLIStatusDurations(t *testing.T) {
	m := cliDirs(t, map[string]string{"f": "x\n"})
	m.mountDaemon("--short-timeout", "1500ms")
	out, err := cli(t, m.tmp, "status", m.mnt)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if !strings.Contains(out, "short_timeout: 1.5s") {
		t.Errorf("status lacks short_timeout: 1.5s:\n%s", out)
	}
	if strings.Contains(out, "_ns:") || strings.Contains(out, "1500000000") {
		t.Errorf("status shows raw nanoseconds:\n%s", out)
	}
	if !regexp.MustCompile(`, up (\d+h)?(\d+m)?\d+s\n`).MatchString(out) {
		t.Errorf("status uptime:\n%s", out)
	}
	m.unmount()
}

// TestCLIStoppedDaemon: with the mount's daemon stopped (SIGSTOP, as a
// debugger or a frozen cgroup leaves it), a control-file command returns
// by itself with exit status 1 and says what to do, instead of waiting for
// the daemon; continued, the daemon answers again. It used to wait until
// the daemon was continued.
func TestCLIStoppedDaemon(t *testing.T) {
	m := cliDirs(t, map[string]string{"a": "x\n"})
	m.mountDaemon()
	if err := syscall.Kill(m.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { syscall.Kill(m.pid, syscall.SIGCONT) }
	t.Cleanup(cont) // before the unmount (cleanups run last first)
	// kill(2) returns before the daemon's threads have stopped; one still
	// running could read the status command's request off /dev/fuse and
	// then stop, and a request read by the daemon is waited for without
	// interruption: the command could then never exit, whatever it says.
	waitAllThreadsStopped(t, m.pid)
	// Every control-file command finds its mount the same way (findMount).
	out, code := cliCode(t, m.tmp, "status", m.mnt)
	if code != 1 || !strings.Contains(out, "has not answered") || !strings.Contains(out, "rubinofs unmount --lazy "+m.mnt) {
		t.Fatalf("rubinofs status with the daemon stopped: exit %d\n%s\nwant exit 1 naming the stopped daemon and the lazy unmount", code, out)
	}
	cont()
	if out, code := cliCode(t, m.tmp, "status", m.mnt); code != 0 {
		t.Fatalf("rubinofs status after SIGCONT: exit %d\n%s", code, out)
	}
}

// TestCLIMountFusermountFails: as a user other than root, a mount whose
// fusermount3 fails (here a stand-in that fails as the real one does when
// /dev/fuse is not open to the user) ends with exit status 1, fusermount3's
// reason, and where to look, in the foreground and with --daemon, and the
// daemon's log holds no panic. Start's releases used to run on a nil
// daemon after a failed mount, and the daemon died of a nil dereference.
// A workspace the user may not read is refused as such, and allow_other
// warns that other users' files will be the daemon user's.
func TestCLIMountFusermountFails(t *testing.T) {
	requireFuse(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	bin := sharedBin(t)
	tmp := t.TempDir()
	openUp(t, tmp)
	ws, mnt, state, fake := filepath.Join(tmp, "ws"), filepath.Join(tmp, "mnt"), filepath.Join(tmp, "state"), filepath.Join(tmp, "fake")
	for _, d := range []string{ws, mnt, state, fake} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if d != fake {
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	const reason = "fusermount3: failed to open /dev/fuse: Permission denied"
	if err := os.WriteFile(filepath.Join(fake, "fusermount3"), []byte("#!/bin/sh\necho '"+reason+"' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, daemonize := range []bool{false, true} {
		args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", "env", "PATH=" + fake + ":" + os.Getenv("PATH"), "HOME=" + tmp,
			bin, "mount", "--state-dir", state}
		if daemonize {
			args = append(args, "--daemon")
		}
		cmd := exec.Command("setpriv", append(args, ws, mnt)...)
		cmd.Dir = tmp
		out, err := runCombined(t, cmd)
		if code := exitCode(err); code != 1 {
			t.Errorf("daemon %v: exit %d, want 1\n%s", daemonize, code, out)
		}
		for _, want := range []string{reason, "mounting " + mnt + ": fusermount3 exited with status 1", "rubinofs doctor"} {
			if !strings.Contains(out, want) {
				t.Errorf("daemon %v: output lacks %q:\n%s", daemonize, want, out)
			}
		}
		if strings.Contains(out, "panic") {
			t.Errorf("daemon %v: the mount panicked:\n%s", daemonize, out)
		}
	}
	if log, err := os.ReadFile(filepath.Join(state, "rubinofs.log")); err != nil {
		t.Errorf("the --daemon mount left no log: %v", err)
	} else if strings.Contains(string(log), "panic") {
		t.Errorf("the daemon's log shows a panic:\n%s", log)
	}
	// allow_other from a daemon that is not root: the mount warns that
	// other users' files will be the daemon user's.
	out, err := runCombined(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "PATH="+fake+":"+os.Getenv("PATH"), "HOME="+tmp,
		bin, "mount", "-o", "allow_other", "--state-dir", state, ws, mnt))
	if !strings.Contains(out, "warning: -o allow_other with a daemon that is not root (uid 65534): what other users create through the mount belongs to uid 65534") {
		t.Errorf("mount -o allow_other as uid 65534 does not warn (exit %d):\n%s", exitCode(err), out)
	}
	// A workspace the user may not enter is named as such, before its
	// configuration file is looked for.
	if err := os.Chmod(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, 0, 0); err != nil {
		t.Fatal(err)
	}
	out, err = runCombined(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME="+tmp, bin, "mount", "--state-dir", state, ws, mnt))
	if code := exitCode(err); code != 1 || !strings.Contains(out, "workspace "+ws+": uid 65534 may not read and search it") {
		t.Errorf("mount of a workspace uid 65534 may not enter: exit %d\n%s", code, out)
	}
}

// TestCLIInPlaceFromInside: `rubinofs mount --in-place --daemon .` run from
// inside the workspace, as people type it, reports absolute paths and
// warns that the shell's working directory is the directory under the
// mount (writes there bypass the guard) and how to enter the mount; run
// from elsewhere it does not warn.
func TestCLIInPlaceFromInside(t *testing.T) {
	cm := cliInPlaceDirs(t, map[string]string{"f.txt": "base\n"})
	tmp, ws := cm.tmp, cm.ws
	out, code := cliCode(t, ws, "mount", "--daemon", "--in-place", "--state-dir", cm.state, ".")
	if code != 0 {
		t.Fatalf("mount --in-place .: exit %d\n%s", code, out)
	}
	cm.trackAgentDaemon(out)
	for _, want := range []string{"mounted " + ws + " at " + ws + " (pid", "your working directory " + ws + " is still the directory under the mount", `cd "$PWD"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	cm.unmount()
	out, code = cliCode(t, tmp, "mount", "--daemon", "--in-place", "--state-dir", cm.state, ws)
	if code != 0 {
		t.Fatalf("mount --in-place WS: exit %d\n%s", code, out)
	}
	cm.trackAgentDaemon(out)
	if strings.Contains(out, "working directory") {
		t.Errorf("warned about a working directory outside the mount:\n%s", out)
	}
	cm.unmount()
}

// waitAllThreadsStopped waits until every thread of process pid is in
// the stopped state (T in /proc/PID/task/TID/stat), that is until the
// group stop a SIGSTOP starts has reached them all. Polls every
// millisecond against cliFailsafe.
func waitAllThreadsStopped(t *testing.T, pid int) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	for deadline := time.Now().Add(cliFailsafe); ; {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("threads of %d: %v", pid, err)
		}
		stopped := len(tasks) > 0
		for _, task := range tasks {
			if st, ok := procState(dir + "/" + task.Name() + "/stat"); !ok || (st != 'T' && st != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon %d did not stop within %v of SIGSTOP", pid, cliFailsafe)
		}
		time.Sleep(time.Millisecond) // polling the threads' state, bounded above
	}
}

// TestUnmountOtherUsersMount: `rubinofs unmount` of root's mount, as uid
// 65534 (with --lazy too), is refused with exit status 1 and says the
// mount is not the user's, and the mount stays. It used to say "not a
// mount point", which is what fusermount3 reports for both. `rubinofs
// status` of it says it is another user's mount (it said "not a rubinofs
// mount").
func TestUnmountOtherUsersMount(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	m := cliDirs(t, map[string]string{"a": "x\n"})
	m.mountDaemon()
	bin := sharedBin(t)
	for _, lazy := range []bool{false, true} {
		args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", bin, "unmount"}
		if lazy {
			args = append(args, "--lazy")
		}
		cmd := exec.Command("setpriv", append(args, m.mnt)...)
		cmd.Dir = os.TempDir()
		out, err := runCombined(t, cmd)
		if code := exitCode(err); code != 1 || !strings.Contains(out, "the mount is not yours") || strings.Contains(out, "not a mount point") {
			t.Errorf("unmount (lazy %v) of root's mount as uid 65534: exit %d\n%s\nwant exit 1 saying the mount is not the user's", lazy, code, out)
		}
		if b, err := os.ReadFile(filepath.Join(m.mnt, "a")); err != nil || string(b) != "x\n" {
			t.Fatalf("the mount did not stay (lazy %v): %q %v", lazy, b, err)
		}
	}
	// A control-file command on it says whose mount it is, not that it
	// is none.
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "status", m.mnt)
	cmd.Dir = os.TempDir()
	out, err := runCombined(t, cmd)
	if code := exitCode(err); code != 1 || !strings.Contains(out, "another user's rubinofs mount, made without -o allow_other") {
		t.Errorf("status of root's mount as uid 65534: exit %d\n%s\nwant exit 1 saying it is another user's mount", code, out)
	}
}
