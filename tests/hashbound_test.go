package tests

// A file larger than the hash bound is never read for its hash: its stat
// stands for its content (docs/DESIGN.md#hash-bound). Before the bound, a
// sparse file of terabytes (stress-ng's fsize stressor makes them) made
// the FLUSH of its writer hash every byte, and close(2) hung for hours.

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// hangDeadline is how long a command that hangs in the mount is given
// before the test fails (a hang detector, not a speed check: each command
// here takes milliseconds).
const hangDeadline = 2 * time.Minute

// runInMount runs the shell script in the mount's root as the default
// session and fails the test when it fails or has not ended within
// hangDeadline.
func (m *mount) runInMount(script string) {
	m.t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = m.mnt
	cmd.Env = testEnv(m.tmp)
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = cmd.CombinedOutput()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			m.t.Fatalf("%s: %v\n%s", script, err, out)
		}
	case <-time.After(hangDeadline):
		m.t.Fatalf("%s: still running after %v (a request of the mount hangs)", script, hangDeadline)
	}
}

// TestHashBoundSparseFile: a session makes a 4 TiB sparse file, appends
// to it and removes it, all its own; the append's close returns at once.
// A 4 TiB file made outside stays guarded by its stat: unread, its removal
// is refused; read, it is allowed; changed outside after the read (its
// mtime moved), it is refused as stale.
func TestHashBoundSparseFile(t *testing.T) {
	m := newMount(t, nil, nil)
	m.runInMount("truncate -s 4T own && printf x >> own && printf y >> own && rm own")
	if d := m.denials(); len(d) != 0 {
		t.Fatalf("denials of the session's own file: %v, want none", d)
	}

	mark := m.appliedMark()
	if err := os.WriteFile(m.backing("big"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(m.backing("big"), 4<<40); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "big")
	if err := os.Remove(m.path("big")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("unlink of an unread 4 TiB file: %v, want EACCES", err)
	}
	m.runInMount("head -c 1 big > /dev/null") // registers the read at open
	mark = m.appliedMark()
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(m.backing("big"), later, later); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "big")
	if err := os.Remove(m.path("big")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("unlink of a 4 TiB file changed outside after its read: %v, want EACCES (stale)", err)
	}
	m.runInMount("head -c 1 big > /dev/null && rm big")
	if _, err := os.Stat(m.backing("big")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backing big after the session read it again and removed it: %v, want it gone", err)
	}
}
