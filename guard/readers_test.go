package guard

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/sessions"
)

// selfFacts returns this test process's real facts with comm and exe set
// to name (the pidfd watch needs a live process).
func selfFacts(t *testing.T, name string) sessions.ProcFacts {
	t.Helper()
	f := sessions.ReadFacts(uint32(os.Getpid()))
	if !f.Known {
		t.Fatal("cannot read this process's facts")
	}
	f.Comm, f.Exe, f.Argv0 = name, name, name
	return f
}

func callerWith(session string, f sessions.ProcFacts) Caller {
	return Caller{Session: session, Facts: func() sessions.ProcFacts { return f }}
}

func codeOf(d Decision) Code { return d.Code }

// TestScannerReadsAreProcessLocal: a scanner's read makes the file
// writable for that very process only, never for its session or for
// another process of it.
func TestScannerReadsAreProcessLocal(t *testing.T) {
	f := newFile(t, "original\n")
	g := New(Config{})
	grep := selfFacts(t, "grep")
	must(t, g.NoteReadBy(callerWith("s", grep), f.target()))
	if n := g.RecordCount("s"); n != 0 {
		t.Fatalf("a scanner's read gave the session %d records, want 0", n)
	}
	if n := g.ProcRecordCount(grep.Proc); n != 1 {
		t.Fatalf("the scanner process has %d records, want 1", n)
	}
	if c := codeOf(g.Decide("s", OpOpenTrunc, f.target())); c != CodeUnread {
		t.Fatalf("session decision after grep read = %q, want unread", c)
	}
	other := grep
	other.Proc.Start++ // another process (the same pid, another start: a recycled pid)
	other.Comm, other.Exe, other.Argv0 = "bash", "bash", "bash"
	if c := codeOf(g.DecideBy(callerWith("s", other), OpOpenTrunc, f.target())); c != CodeUnread {
		t.Fatalf("another process's decision after grep read = %q, want unread", c)
	}
	if c := codeOf(g.DecideBy(callerWith("s", grep), OpRenameOver, f.target())); c != "" {
		t.Fatalf("the scanner's own decision = %q, want allowed (sed -i, git checkout)", c)
	}
	// The process's record goes stale like a session's.
	f.write("changed!\n")
	if c := codeOf(g.DecideBy(callerWith("s", grep), OpOpenTrunc, f.target())); c != CodeUnread {
		// the session refuses as unread; the process's stale record does not override it
		t.Fatalf("the scanner's decision after an external change = %q, want a refusal", c)
	}
	// A non-scanner's read counts for the session.
	must(t, g.NoteReadBy(callerWith("s", other), f.target()))
	if c := codeOf(g.Decide("s", OpOpenTrunc, f.target())); c != "" {
		t.Fatalf("session decision after cat read = %q, want allowed", c)
	}
}

// TestScannerForeignMutation: another session's mutation makes a scanner
// process's record stale, as it does a session's.
func TestScannerForeignMutation(t *testing.T) {
	f := newFile(t, "original\n")
	g := New(Config{})
	grep := selfFacts(t, "git")
	must(t, g.NoteReadBy(callerWith("s", grep), f.target()))
	g.NoteMutation(f.target().Stat.ID, "other")
	if d := g.DecideBy(callerWith("s", grep), OpOpenTrunc, f.target()); d.Allow {
		t.Fatal("the scanner's record survived another session's mutation")
	}
}

func TestIsScanner(t *testing.T) {
	g := New(Config{})
	custom := New(Config{Scanners: []string{"sed", "averyveryverylongname"}})
	none := New(Config{Scanners: []string{}})
	k := func(comm, exe, argv0 string) sessions.ProcFacts {
		return sessions.ProcFacts{Known: true, Comm: comm, Exe: exe, Argv0: argv0}
	}
	cases := []struct {
		g    *Guard
		f    sessions.ProcFacts
		want bool
	}{
		{g, k("grep", "grep", "grep"), true},
		{g, k("grep", "", ""), true},                 // exe unreadable: comm alone
		{g, k("ack", "perl", "/usr/bin/perl"), true}, // a perl script
		{g, k("vet", "vet", "/usr/lib/go/pkg/tool/linux_amd64/vet"), true},
		{g, k("rg", "claude", "claude"), false},    // a program that merely calls itself rg
		{g, k("claude", "claude", "rg"), true},     // a multi-call binary run as rg
		{g, k("busybox", "busybox", "grep"), true}, // busybox grep
		{g, k("grep", "busybox", "grep"), true},
		{g, k("cat", "cat", "cat"), false},
		{g, k("sed", "sed", "sed"), false},
		{g, sessions.ProcFacts{Comm: "grep", Exe: "grep"}, false}, // facts unknown
		{custom, k("sed", "sed", "sed"), true},
		{custom, k("grep", "grep", "grep"), false},
		{custom, k("averyveryverylo", "averyveryverylongname", ""), true}, // comm is clipped to 15 bytes
		{none, k("grep", "grep", "grep"), false},
	}
	for i, c := range cases {
		if got := c.g.IsScanner(c.f); got != c.want {
			t.Errorf("case %d: IsScanner(%+v) = %v, want %v", i, c.f, got, c.want)
		}
	}
}

// TestScannerRecordsDroppedAtExit: a scanner process's records go when it
// exits.
func TestScannerRecordsDroppedAtExit(t *testing.T) {
	f := newFile(t, "original\n")
	g := New(Config{})
	cmd := exec.Command("sleep", "1000")
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	facts := sessions.ReadFacts(uint32(cmd.Process.Pid))
	if !facts.Known || facts.Comm != "sleep" {
		t.Fatalf("facts of sleep: %+v", facts)
	}
	facts.Comm, facts.Exe = "grep", "grep" // as if it were grep
	must(t, g.NoteReadBy(callerWith("s", facts), f.target()))
	if g.ProcRecordCount(facts.Proc) != 1 {
		t.Fatal("no record for the scanner process")
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for g.ProcRecordCount(facts.Proc) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the records of an exited scanner were not dropped")
		}
		time.Sleep(time.Millisecond)
	}
}

type fakeRoots map[string]sessions.ProcKey

func (r fakeRoots) HarnessRoot(s string) (sessions.ProcKey, bool) { k, ok := r[s]; return k, ok }

// TestHarnessRootReadsDoNotCount: in a harness-mode session the root's own
// reads count for nothing, its children's count for the session, and a
// reader whose facts are unknown counts for nothing (it may be the root).
func TestHarnessRootReadsDoNotCount(t *testing.T) {
	f := newFile(t, "original\n")
	g := New(Config{})
	root := sessions.ProcFacts{Known: true, Proc: sessions.ProcKey{Pid: 100, Start: 7}, Comm: "claude", Exe: "claude"}
	child := sessions.ProcFacts{Known: true, Proc: sessions.ProcKey{Pid: 101, Start: 8}, Comm: "cat", Exe: "cat"}
	g.SetHarnessRoots(fakeRoots{"h": root.Proc})
	must(t, g.NoteReadBy(callerWith("h", root), f.target()))
	must(t, g.NoteReadBy(callerWith("h", sessions.ProcFacts{}), f.target()))
	if c := codeOf(g.DecideBy(callerWith("h", root), OpOpenTrunc, f.target())); c != CodeUnread {
		t.Fatalf("after the root's own read: %q, want unread", c)
	}
	// The same facts in a session not in harness mode count.
	must(t, g.NoteReadBy(callerWith("plain", root), f.target()))
	if c := codeOf(g.Decide("plain", OpOpenTrunc, f.target())); c != "" {
		t.Fatalf("without harness mode: %q, want allowed", c)
	}
	must(t, g.NoteReadBy(callerWith("h", child), f.target()))
	if c := codeOf(g.DecideBy(callerWith("h", root), OpOpenTrunc, f.target())); c != "" {
		t.Fatalf("after a child's read, the root's write: %q, want allowed", c)
	}
}

// TestDeclareRead: what a harness's declarations record.
func TestDeclareRead(t *testing.T) {
	t.Run("hash of the bytes on disk", func(t *testing.T) {
		f := newFile(t, "original\n")
		g := New(Config{})
		must(t, g.DeclareRead("h", f.target(), HashBytes([]byte("original\n")), true))
		if c := decideCode(g, "h", f); c != "" {
			t.Fatalf("%q, want allowed", c)
		}
	})
	t.Run("hash of other bytes is stale", func(t *testing.T) {
		f := newFile(t, "original\n")
		g := New(Config{})
		must(t, g.DeclareRead("h", f.target(), HashBytes([]byte("what the model saw\n")), true))
		if c := decideCode(g, "h", f); c != CodeStale {
			t.Fatalf("%q, want stale", c)
		}
	})
	t.Run("without hash, no record: the bytes on disk", func(t *testing.T) {
		f := newFile(t, "original\n")
		g := New(Config{})
		must(t, g.DeclareRead("h", f.target(), Hash{}, false))
		if c := decideCode(g, "h", f); c != "" {
			t.Fatalf("%q, want allowed", c)
		}
		f.write("changed!\n")
		if c := decideCode(g, "h", f); c != CodeStale {
			t.Fatalf("after an external change: %q, want stale", c)
		}
	})
	t.Run("without hash never refreshes a stale record", func(t *testing.T) {
		f := newFile(t, "original\n")
		g := New(Config{})
		must(t, g.DeclareRead("h", f.target(), HashBytes([]byte("original\n")), true))
		f.write("changed!\n")
		must(t, g.DeclareRead("h", f.target(), Hash{}, false)) // a partial read, or a stub
		if c := decideCode(g, "h", f); c != CodeStale {
			t.Fatalf("%q, want stale", c)
		}
		must(t, g.DeclareRead("h", f.target(), HashBytes([]byte("changed!\n")), true)) // read in full
		if c := decideCode(g, "h", f); c != "" {
			t.Fatalf("after a full read: %q, want allowed", c)
		}
	})
	t.Run("a stale hash replaces a fresh record", func(t *testing.T) {
		f := newFile(t, "original\n")
		g := New(Config{})
		must(t, g.NoteRead("h", f.target()))
		must(t, g.DeclareRead("h", f.target(), HashBytes([]byte("older view\n")), true))
		if c := decideCode(g, "h", f); c != CodeStale {
			t.Fatalf("%q, want stale", c)
		}
	})
}

// TestDeclareEditFailed: the next DuplicateRead bypasses dedup once, and a
// full declared read consumes the recovery.
func TestDeclareEditFailed(t *testing.T) {
	f := newFile(t, "original\n")
	g := New(Config{})
	tr := g.ForSession("h")
	id := f.target().Stat.ID
	if dup, _ := tr.DuplicateRead(f.target(), 0, 10, Hash{}); dup {
		t.Fatal("first read a duplicate")
	}
	if dup, _ := tr.DuplicateRead(f.target(), 0, 10, Hash{}); !dup {
		t.Fatal("second read not a duplicate")
	}
	g.DeclareEditFailed("h", id)
	if !g.RecoveryPending("h", id) {
		t.Fatal("no recovery pending")
	}
	if dup, _ := tr.DuplicateRead(f.target(), 0, 10, Hash{}); dup {
		t.Fatal("the read after edit-failed was deduplicated")
	}
	g.DeclareEditFailed("h", id)
	must(t, g.DeclareRead("h", f.target(), HashBytes([]byte("original\n")), true))
	if g.RecoveryPending("h", id) {
		t.Fatal("a full declared read left the recovery pending")
	}
}

func TestParseHash(t *testing.T) {
	h := HashBytes([]byte("hello\n"))
	got, err := ParseHash(h.String())
	if err != nil || got != h {
		t.Fatalf("ParseHash(%s) = %v, %v", h, got, err)
	}
	for _, bad := range []string{"", "xyz", h.String()[:31], h.String() + "0", "00000000000000000000000000000000",
		"zz" + h.String()[2:]} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted", bad)
		}
	}
}

// TestScannerReadTakesSessionHash: a scanner's read of a file whose
// session's record describes its current stat (here the session's own
// write, hashed as it passed) takes that record's hash without reading
// the file; the process's record decides alone once the session's is
// gone. After a change outside the mount the scanner hashes the file.
func TestScannerReadTakesSessionHash(t *testing.T) {
	f := newFile(t, "mine\n")
	g := New(Config{})
	must(t, g.NoteWriteHashed("s", f.target(), HashBytes([]byte("mine\n"))))
	grep := selfFacts(t, "grep")
	misses := g.Counts().Hash.Misses
	if _, err := g.NoteReadDeferred(callerWith("s", grep), f.target(), nil); err != nil {
		t.Fatal(err)
	}
	if m := g.Counts().Hash.Misses; m != misses {
		t.Fatalf("the scanner's read hashed the file (%d misses, want %d)", m, misses)
	}
	if n := g.ProcRecordCount(grep.Proc); n != 1 {
		t.Fatalf("the scanner process has %d records, want 1", n)
	}
	g.DropSession("s")
	if c := codeOf(g.DecideBy(callerWith("s", grep), OpOpenTrunc, f.target())); c != "" {
		t.Fatalf("the scanner's own decision = %q, want allowed", c)
	}
	f.write("changed outside\n")
	must(t, g.NoteWriteHashed("s", f.target(), HashBytes([]byte("stale view\n"))))
	f.write("changed outside again\n") // the session's record no longer describes the file
	misses = g.Counts().Hash.Misses
	if _, err := g.NoteReadDeferred(callerWith("s", grep), f.target(), nil); err != nil {
		t.Fatal(err)
	}
	if m := g.Counts().Hash.Misses; m != misses+1 {
		t.Fatalf("the scanner's read of a changed file: %d misses, want %d", m, misses+1)
	}
	if c := codeOf(g.DecideBy(callerWith("s", grep), OpOpenTrunc, f.target())); c != "" {
		t.Fatalf("the scanner's decision after its own read of the new content = %q, want allowed", c)
	}
}
