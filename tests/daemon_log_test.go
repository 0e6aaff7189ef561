package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logMax is the --log-max-size these tests mount with: the least allowed.
const logMax = 1 << 20

// TestDaemonLogRotates: a --daemon mount with --debug (a record per FUSE
// request) and --log-max-size 1 MiB, driven by ls and cat until its log
// has been rotated, keeps rubinofs.log and rubinofs.log.1 each within the
// bound (and a record), and the daemon's stdout and stderr, where a
// crash's trace goes, are the new rubinofs.log, not the rotated one.
func TestDaemonLogRotates(t *testing.T) {
	m := cliDirs(t, map[string]string{"notes.txt": "one\n", "a.go": "package a\n", "b.go": "package a\n"})
	m.mountDaemon("--debug", "--log-max-size="+strconv.Itoa(logMax))
	logPath := filepath.Join(m.state, "rubinofs.log")
	rounds := 0
	for deadline := time.Now().Add(2 * time.Minute); ; rounds++ {
		if _, err := os.Stat(logPath + ".1"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			st, _ := os.Stat(logPath)
			t.Fatalf("no rubinofs.log.1 after %d rounds of ls and cat (rubinofs.log: %v bytes)", rounds, st.Size())
		}
		if out, code := m.sh("for i in $(seq 50); do ls -la . >/dev/null; cat notes.txt a.go >/dev/null; done"); code != 0 {
			t.Fatalf("ls and cat: exit %d\n%s", code, out)
		}
	}
	if out, code := m.sh("ls -la . >/dev/null"); code != 0 { // a record after the rotation
		t.Fatalf("ls: exit %d\n%s", code, out)
	}
	const slack = 64 << 10 // one record past the bound, at most
	for _, p := range []string{logPath, logPath + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > logMax+slack {
			t.Errorf("%s holds %d bytes, past the bound of %d", filepath.Base(p), st.Size(), logMax)
		}
		t.Logf("%s: %d bytes after %d rounds", filepath.Base(p), st.Size(), rounds)
	}
	want, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range []string{"1", "2"} {
		got, err := os.Stat("/proc/" + strconv.Itoa(m.pid) + "/fd/" + fd)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(got, want) {
			target, _ := os.Readlink("/proc/" + strconv.Itoa(m.pid) + "/fd/" + fd)
			t.Errorf("the daemon's descriptor %s is %s, not the current rubinofs.log", fd, target)
		}
	}
}

// TestRefusalFloodLogBounded: a process retrying a refused write 20,000
// times leaves at most the burst and the rate's worth of refusal records
// in the daemon's log (docs/DESIGN.md#log-bound), and the next refusal
// logged is preceded by one record counting those left out.
func TestRefusalFloodLogBounded(t *testing.T) {
	m := cliDirs(t, map[string]string{"locked.txt": "never read\n"})
	m.mountDaemon("--log-max-size=" + strconv.Itoa(logMax))
	logPath := filepath.Join(m.state, "rubinofs.log")
	const flood = 20000
	start := time.Now()
	script := `python3 -c "
import sys
n = 0
for i in range(` + strconv.Itoa(flood) + `):
    try:
        open('locked.txt', 'w').close()
    except PermissionError:
        n += 1
sys.exit(0 if n == ` + strconv.Itoa(flood) + ` else 1)
"`
	if out, code := m.sh(script); code != 0 {
		t.Fatalf("the refused writes: exit %d (some were let through?)\n%s", code, out)
	}
	elapsed := time.Since(start)
	records := func() string {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	logged := strings.Count(records(), "guard refused a mutation")
	most := 500 + int(50*elapsed.Seconds()) + 1
	t.Logf("%d refusals in %v: %d records (at most %d)", flood, elapsed.Round(time.Millisecond), logged, most)
	if logged > most || logged == 0 {
		t.Errorf("%d refused writes left %d refusal records in the log, want 1 to %d", flood, logged, most)
	}
	// The next refusal let through says how many were left out.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(records(), "guard refusals not logged"); {
		if time.Now().After(deadline) {
			t.Fatal("no record counting the refusals left out")
		}
		m.sh("echo x > locked.txt 2>/dev/null")
	}
	if got, _ := os.ReadFile(filepath.Join(m.ws, "locked.txt")); string(got) != "never read\n" {
		t.Errorf("locked.txt holds %q", got)
	}
}
