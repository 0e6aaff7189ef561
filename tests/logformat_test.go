package tests

import (
	"encoding/json"
	"os/exec"
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
	var denial map[string]any
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
