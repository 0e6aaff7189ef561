package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/journal"
)

// TestJournalSyncLostBlob: a pre-image whose blob an OS crash lost before
// the flusher made it durable (journal.sync = write; here deleted from the
// state directory) is reported by the rewind as unrecoverable (listed,
// counted, exit status non-zero) and its path left as the session made
// it, while the other paths are restored (docs/DESIGN.md#journal-sync).
func TestJournalSyncLostBlob(t *testing.T) {
	m := journalMount(t)
	s := m.startSession("agent")
	s.must("cat notes.txt src/app.txt >/dev/null && echo more >> notes.txt && echo three >> src/app.txt")
	recs, _, err := journal.ReadLog(filepath.Join(m.state, "journal", "sessions", "agent.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	pre := preOf(t, findRecord(t, recs, "write", "notes.txt", ""), "notes.txt")
	if err := os.Remove(filepath.Join(m.state, "journal", "blobs", pre.Blob[:2], pre.Blob[2:])); err != nil {
		t.Fatal(err)
	}
	out, code := s.run("rubinofs rewind --to cp000000")
	if code == 0 {
		t.Errorf("a rewind with a lost blob exited 0:\n%s", out)
	}
	if _, _, _, unrecoverable := rewindCounts(t, out); unrecoverable != 1 {
		t.Errorf("unrecoverable = %d, want 1 (notes.txt)\n%s", unrecoverable, out)
	}
	if !regexp.MustCompile(`(?m)^unrecoverable .*:\n  notes\.txt: .*unrecoverable: blob lost$`).MatchString(out) {
		t.Errorf("the rewind does not list notes.txt as unrecoverable (blob lost):\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(m.ws, "notes.txt")); string(b) != "alpha\nmore\n" {
		t.Errorf("notes.txt after the rewind: %q, want the session's bytes left as they were", b)
	}
	if b, _ := os.ReadFile(filepath.Join(m.ws, "src/app.txt")); string(b) != "line one\nline two\n" {
		t.Errorf("src/app.txt after the rewind: %q, want it restored", b)
	}
}

// TestJournalSyncFsyncKill9: with --journal-sync=fsync (records and blobs
// fsync'ed before the change is acknowledged) a daemon killed with SIGKILL
// right after a session's write returned leaves that write's record with
// its complete blob, as the default (write) mode does
// (TestJournalRecordKill9); `config show` lists the mode with its flag.
func TestJournalSyncFsyncKill9(t *testing.T) {
	c := cliDirs(t, map[string]string{"f": "before the kill\n"})
	c.mountDaemon("--journal-sync=fsync")
	if out, code := cliCode(t, c.tmp, "config", "show", "--state-dir", c.state, "--journal-sync", "fsync", c.ws); code != 0 ||
		!regexp.MustCompile(`(?m)^sync = "fsync" +# from flag --journal-sync$`).MatchString(out) {
		t.Fatalf("config show --journal-sync fsync: exit %d\n%s", code, out)
	}
	script := "cat f >/dev/null && echo after >> f"
	cmd := exec.Command(rubinofsBin(t), "run", "--session", "k9", "--mount", c.mnt, "--", "/bin/sh", "-c", "cd "+shq(c.mnt)+" && "+script)
	cmd.Dir = c.tmp
	cmd.Env = testEnv(c.tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	c.kill9()
	recs, _, err := journal.ReadLog(filepath.Join(c.state, "journal", "sessions", "k9.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	pre := preOf(t, findRecord(t, recs, "write", "f", ""), "f")
	b, err := os.ReadFile(filepath.Join(c.state, "journal", "blobs", pre.Blob[:2], pre.Blob[2:]))
	if err != nil || string(b) != "before the kill\n" {
		t.Fatalf("blob of the acknowledged write: %q, %v", b, err)
	}
}

// TestJournalSyncLinkDoomed: an rm through the mount keeps the removed
// file's pre-image by linking its inode into the blob store (the blob is
// the file's inode, with its bytes), except for a file a handle through
// the mount holds open: that one is copied, so the handle sees st_nlink 0
// after the removal, as without the journal (docs/DESIGN.md#journal-sync).
func TestJournalSyncLinkDoomed(t *testing.T) {
	m := journalMount(t)
	var notes, gone syscall.Stat_t
	if err := syscall.Stat(filepath.Join(m.ws, "notes.txt"), &notes); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join(m.ws, "gone.txt"), &gone); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(filepath.Join(m.mnt, "gone.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	s := m.startSession("agent")
	s.must("cat notes.txt gone.txt >/dev/null && rm notes.txt gone.txt")
	var st syscall.Stat_t
	if err := syscall.Fstat(int(held.Fd()), &st); err != nil || st.Nlink != 0 {
		t.Errorf("a handle held open across the rm sees st_nlink %d (%v), want 0", st.Nlink, err)
	}
	recs, _, err := journal.ReadLog(filepath.Join(m.state, "journal", "sessions", "agent.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, bytes string
		ino         uint64
		linked      bool
	}{{"notes.txt", "alpha\n", notes.Ino, true}, {"gone.txt", "delete me\n", gone.Ino, false}} {
		pre := preOf(t, findRecord(t, recs, "unlink", c.name, ""), c.name)
		p := filepath.Join(m.state, "journal", "blobs", pre.Blob[:2], pre.Blob[2:])
		b, err := os.ReadFile(p)
		if err != nil || string(b) != c.bytes {
			t.Errorf("blob of %s: %q, %v", c.name, b, err)
		}
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if (st.Ino == c.ino) != c.linked {
			t.Errorf("blob of %s: inode %d, the file's was %d; want linked %v", c.name, st.Ino, c.ino, c.linked)
		}
	}
}
