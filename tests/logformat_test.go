package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mountCLI runs `rubinofs mount ARGS... WS MNT` in the foreground with a
// file f that was never read through the mount, makes one refused blind
// write of f, stops the daemon with SIGTERM, waits for it and returns its
// output (stderr: it writes nothing else).
func mountCLI(t *testing.T, args ...string) string {
	t.Helper()
	m := cliDirs(t, map[string]string{"f": "keep\n"})
	fg := startForeground(t, m.tmp, nil, true, append(append([]string{"--state-dir", m.state}, args...), m.ws, m.mnt)...)
	sh := exec.Command("/bin/sh", "-c", "echo blind > "+shq(m.path("f")))
	sh.Dir = m.tmp
	if out, err := sh.CombinedOutput(); err == nil {
		t.Fatalf("a blind write of f succeeded, want a refusal\n%s", out)
	}
	if err := fg.stop(); err != nil {
		t.Fatalf("rubinofs mount %v after SIGTERM: %v\n%s", args, err, fg.output())
	}
	return fg.output()
}

// TestLogFormat checks `rubinofs mount --log-format json`: every stderr
// line is a JSON object with time, level and msg, and the refusal is one
// record with the structured fields session, pid, op, path and code;
// --log-level error filters it out; the text format carries the same
// fields as key=value; and bad values are usage errors.
func TestLogFormat(t *testing.T) {
	out := mountCLI(t, "--log-format", "json")
	var denial, mounted map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is not JSON: %q (%v)", line, err)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("record %q lacks %q", line, k)
			}
		}
		if rec["code"] != nil {
			denial = rec
		}
		if rec["msg"] == "mounted" {
			mounted = rec
		}
	}
	if mounted == nil || mounted["level"] != "INFO" || mounted["mountpoint"] == nil || mounted["mode"] != "enforce" {
		t.Errorf("lifecycle record %v: want msg mounted at level INFO with mountpoint and mode enforce\n%s", mounted, out)
	}
	if denial == nil {
		t.Fatalf("no refusal record in the JSON log:\n%s", out)
	}
	if denial["level"] != "WARN" || denial["code"] != "unread" || denial["path"] != "f" ||
		denial["session"] != "default" || denial["op"] == nil || denial["op"] == "" {
		t.Errorf("refusal record %v: want level WARN, code unread, path f, session default and an op", denial)
	}
	if pid, ok := denial["pid"].(float64); !ok || pid <= 0 {
		t.Errorf("refusal record has pid %v, want the writer's pid", denial["pid"])
	}
	if !strings.Contains(out, `"msg":"terminated: unmounting`) {
		t.Errorf("the log package's default logger does not write through slog (no JSON \"terminated: unmounting\" record):\n%s", out)
	}

	out = mountCLI(t, "--log-format", "json", "--log-level", "error")
	if strings.Contains(out, `"code"`) || strings.Contains(out, `"level":"INFO"`) || strings.Contains(out, `"level":"WARN"`) {
		t.Errorf("--log-level error let less severe records through:\n%s", out)
	}

	out = mountCLI(t) // text, the default
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "code=unread") || !strings.Contains(out, "path=f") {
		t.Errorf("text log lacks the refusal's level=WARN code=unread path=f:\n%s", out)
	}

	tmp := t.TempDir()
	for _, c := range []struct{ flag, value, want string }{
		{"--log-format", "xml", "want text or json"},
		{"--log-level", "loud", "want debug, info, warn or error"},
	} {
		out, err := cli(t, tmp, "mount", c.flag, c.value, tmp, tmp)
		if exitCode(err) != 2 || !strings.Contains(out, c.want) {
			t.Errorf("mount %s %s: %v, want exit 2 mentioning %q:\n%s", c.flag, c.value, err, c.want, out)
		}
	}
}

// TestLogFormatLevels checks that the daemon's own messages are levelled
// records with attributes: with `--log-format json --log-level warn`, a
// state directory on a full tmpfs makes the periodic checkpoint (every
// 20 ms) fail again and again, and that appears as exactly one WARN record
// "saving read state failed" with path (reads.json) and err (ENOSPC); the
// workspace's own .rubino is a WARN record with its path; and no INFO
// record (the lifecycle: mounted, unmounting) gets through.
func TestLogFormatLevels(t *testing.T) {
	tmp := t.TempDir()
	stateFS := filepath.Join(tmp, "statefs")
	tinyTmpfs(t, stateFS, 4<<20) // faults_test.go; unmounted after everything below
	ws := makeWorkspace(t, tmp, map[string]string{"f": "one\n", ".rubino": "mine\n"})
	state := filepath.Join(stateFS, "state")
	m := cliMountAt(t, tmp, ws, state)
	fg := startForeground(t, tmp, nil, true, "--state-dir", state, "--save-interval", "20ms",
		"--log-format", "json", "--log-level", "warn", ws, m.mnt)
	filler := filepath.Join(stateFS, "filler")
	fill(t, filler)
	// A read changes the read state, so every checkpoint tries to save it.
	if out, code := m.sh("cat f >/dev/null"); code != 0 {
		t.Fatalf("cat f: exit %d\n%s", code, out)
	}
	waitFor(t, "three failed checkpoints in .rubino/status", func() bool {
		st, _ := readStatus(t, m.mnt)["state"].(map[string]any)
		n, _ := st["save_failures"].(float64)
		return n >= 3
	})
	// Space comes back before the unmount, whose final save then succeeds
	// (and the compaction store closes cleanly).
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := fg.stop(); err != nil {
		t.Fatalf("rubinofs mount after SIGTERM: %v\n%s", err, fg.output())
	}
	out := fg.output()

	var saves, shadow []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is not JSON: %q (%v)", line, err)
			continue
		}
		msg, _ := rec["msg"].(string)
		switch {
		case rec["level"] == "INFO" || rec["level"] == "DEBUG":
			t.Errorf("--log-level warn let a %v record through: %s", rec["level"], line)
		case strings.HasPrefix(msg, "saving read state"):
			saves = append(saves, rec)
		case strings.Contains(msg, ".rubino"):
			shadow = append(shadow, rec)
		}
	}
	if len(saves) != 1 {
		t.Errorf("%d records of failed saves, want exactly 1 (the same error is logged once):\n%s", len(saves), out)
	} else if rec, e := saves[0], fmt.Sprint(saves[0]["err"]); rec["level"] != "WARN" ||
		rec["path"] != filepath.Join(state, "reads.json") || !strings.Contains(e, "no space left on device") {
		t.Errorf("failed-save record %v: want level WARN, path %s/reads.json, err with ENOSPC", rec, state)
	}
	if len(shadow) != 1 || shadow[0]["level"] != "WARN" || shadow[0]["path"] != filepath.Join(ws, ".rubino") {
		t.Errorf("shadowed .rubino records %v: want one at level WARN with path %s/.rubino\n%s", shadow, ws, out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".rubino")); err != nil || string(b) != "mine\n" {
		t.Errorf("the workspace's .rubino = %q, %v; want it untouched", b, err)
	}
}
