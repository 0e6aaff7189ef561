package guard

import (
	"io"
	"testing"
)

// fakeGit holds, per path, the one blob content git has for it. after, when
// set, runs once the content was read (to change the file meanwhile).
type fakeGit struct {
	blobs map[string]string
	after func()
	asked int
}

func (g *fakeGit) Holds(rel string, size int64, content func() (io.Reader, error)) (bool, error) {
	g.asked++
	blob, ok := g.blobs[rel]
	if !ok {
		return false, nil
	}
	r, err := content()
	if err != nil {
		return false, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return false, err
	}
	if g.after != nil {
		g.after()
	}
	return int64(len(b)) == size && string(b) == blob, nil
}

// comm returns a comm func that counts its calls.
func commOf(name string, calls *int) func() string {
	return func() string { *calls++; return name }
}

// TestGitSafe: git may replace a file it holds that the session never read
// (the bytes become the session's read); other programs may not, and git
// may not replace bytes it does not hold. The program is asked only when
// read-before-write refuses.
func TestGitSafe(t *testing.T) {
	for _, mode := range []Mode{ModeEnforce, ModeWarn} {
		f := newFile(t, "committed\n")
		fg := &fakeGit{blobs: map[string]string{f.rel: "committed\n"}}
		g := New(Config{Mode: mode, Git: fg})
		calls := 0
		if d := g.DecideCaller("s", commOf("sh", &calls), OpUnlink, f.target()); !d.WouldDeny && d.Allow {
			t.Fatalf("%s: sh allowed to delete an unread file: %+v", mode, d)
		}
		if fg.asked != 0 {
			t.Fatalf("%s: git was asked about a program that is not git", mode)
		}
		for _, op := range []Op{OpUnlink, OpOpenTrunc, OpRenameOver, OpWrite, OpTruncate} {
			if d := g.DecideCaller("s", commOf("git", &calls), op, f.target()); !d.Allow || d.WouldDeny {
				t.Fatalf("%s: git %s of a file it holds: %+v", mode, op, d)
			}
		}
		if !g.ForSession("s").Seen(f.target().Stat.ID) {
			t.Fatalf("%s: the vouched bytes were not registered as read", mode)
		}
		// Now read (fresh): the program is no longer asked.
		before := calls
		if d := g.DecideCaller("s", commOf("git", &calls), OpUnlink, f.target()); !d.Allow || d.WouldDeny || calls != before {
			t.Fatalf("%s: fresh record: %+v, comm asked %d times", mode, d, calls-before)
		}
		// A change git does not hold, never read by session t.
		f.write("uncommitted\n")
		d := g.DecideCaller("t", commOf("git", &calls), OpUnlink, f.target())
		if d.Code != CodeUnread || (mode == ModeEnforce && d.Allow) {
			t.Fatalf("%s: git deleting an unread change: %+v", mode, d)
		}
		// Session s's record is stale now: git holds nothing newer either.
		if d := g.DecideCaller("s", commOf("git", &calls), OpOpenTrunc, f.target()); d.Code != CodeStale {
			t.Fatalf("%s: git over a stale, unheld change: %+v", mode, d)
		}
		// Back to the committed bytes: held by git again, so session t
		// (which never read them) may have git replace them.
		f.write("committed\n")
		if d := g.DecideCaller("t", commOf("git", &calls), OpUnlink, f.target()); !d.Allow || d.WouldDeny {
			t.Fatalf("%s: git over held bytes for a second session: %+v", mode, d)
		}
	}
}

// TestGitSafeChangedWhileVouching: the file changes after git's blob was
// compared: the registered read is of the compared bytes, so the decision
// made again sees the change and refuses (nothing unseen is lost).
func TestGitSafeChangedWhileVouching(t *testing.T) {
	f := newFile(t, "committed\n")
	fg := &fakeGit{blobs: map[string]string{f.rel: "committed\n"}}
	fg.after = func() { f.write("changed meanwhile\n") }
	g := New(Config{Git: fg})
	tg := f.target()
	calls := 0
	d := g.DecideCaller("s", commOf("git", &calls), OpUnlink, tg)
	if d.Allow {
		t.Fatalf("allowed over bytes changed after the blob check: %+v", d)
	}
	if d.Code != CodeStale {
		t.Fatalf("code %q, want stale (the vouched read no longer matches)", d.Code)
	}
}

// TestIsGit: only the git binary's name.
func TestIsGit(t *testing.T) {
	for comm, want := range map[string]bool{"git": true, "git-lfs": false, "git-merge-one": false, "sh": false, "": false, "Git": false} {
		if IsGit(comm) != want {
			t.Errorf("IsGit(%q) = %v", comm, !want)
		}
	}
}
