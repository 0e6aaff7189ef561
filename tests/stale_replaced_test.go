package tests

// A refusal names the right cause (docs/DESIGN.md#stale-replaced): a file
// replaced by a rename since the session read it is refused as stale, not
// unread, and the refusal says who replaced it when the refused caller may
// see that session (docs/DESIGN.md#trust), or that it happened outside the
// mount.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// lastDenial returns the newest denial of session at path, failing the
// test when there is none.
func (m *mount) lastDenial(session, path string) map[string]any {
	m.t.Helper()
	var last map[string]any
	for _, d := range m.denials() {
		if d["session"] == session && d["path"] == path {
			last = d
		}
	}
	if last == nil {
		m.t.Fatalf("no denial of session %s at %s in %v", session, path, m.denials())
	}
	return last
}

// wantStale fails the test unless d is a stale refusal replaced by by
// whose message says so.
func wantStale(t *testing.T, d map[string]any, by string) {
	t.Helper()
	msg, _ := d["message"].(string)
	if d["code"] != "stale" || d["replaced_by"] != by || !strings.Contains(msg, "replaced") || !strings.Contains(msg, by) {
		t.Errorf("denial %v: want code stale, replaced_by %q, a message naming it", d, by)
	}
}

// TestStaleAfterAtomicSave: session A reads f, session B saves f
// atomically (writes a temporary file and renames it over f), and A's
// write to f is refused with EACCES as stale, naming B to a caller that
// may see B (root's shell outside every session) and saying "another
// session" to one that may not (a session beside B; another uid). A file
// the session never read is still unread, and an edit by rename in the
// backing directory is stale "outside the mount". On a guard whose records
// follow inodes only, each of these said "unread: read it first".
func TestStaleAfterAtomicSave(t *testing.T) {
	m := newSharedMount(t, map[string]string{"f": "v1\n", "g": "v1\n", "n": "v1\n", "e": "v1\n", "h": "v1\n"},
		func(c *daemon.Config) {
			if err := os.Chmod(filepath.Join(c.Workspace, "n"), 0o666); err != nil {
				t.Fatal(err)
			}
		})
	saver := m.startAgent("saver")
	save := func(name string) {
		t.Helper()
		saver.ok("cat " + name + " && printf 'saved\\n' > " + name + ".tmp && chmod 666 " + name + ".tmp && mv " + name + ".tmp " + name)
	}

	// Root outside every session (admin) may see every session: named.
	m.mustSh("cat f")
	save("f")
	if out := m.mustFail("echo x > f"); !strings.Contains(out, "Permission denied") {
		t.Errorf("append to f: %q, want EACCES", out)
	}
	wantStale(t, m.lastDenial("default", "f"), "session saver")

	// A session beside the saver may not see it: "another session".
	a := m.startAgent("agent-a")
	a.ok("cat g")
	save("g")
	a.refused("echo x > g")
	wantStale(t, m.lastDenial("agent-a", "g"), "another session")
	// Never read: still unread.
	a.refused("echo x > h")
	if d := m.lastDenial("agent-a", "h"); d["code"] != "unread" {
		t.Errorf("never-read h: %v, want unread", d)
	}

	// Another uid may not see root's session: "another session".
	if out, err := m.nobody(`cd "$MNT" && cat n >/dev/null`); err != nil {
		t.Fatalf("nobody reads n: %v %s", err, out)
	}
	save("n")
	if out, err := m.nobody(`cd "$MNT" && echo x > n`); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("nobody appends to the replaced n: %v %q, want EACCES", err, out)
	}
	wantStale(t, m.lastDenial("default-65534", "n"), "another session")

	// Outside the mount: an atomic save in the backing directory.
	m.mustSh("cat e")
	mark := m.appliedMark()
	m.writeBacking("e.tmp", "external\n")
	if err := os.Rename(m.backing("e.tmp"), m.backing("e")); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "e")
	m.mustFail("echo x > e")
	wantStale(t, m.lastDenial("default", "e"), "outside the mount")
	if got := m.readBacking("e"); got != "external\n" {
		t.Errorf("e = %q after the refused write", got)
	}
}
