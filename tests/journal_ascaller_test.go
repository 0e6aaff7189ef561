package tests

// The journal's requests and read declarations act with the requester's
// own rights (docs/DESIGN.md#as-caller): a second uid (65534) gets no
// byte or hash of root's unreadable files through diff, changes, a read
// declaration or tracked, and rewinds nothing it could not write itself;
// a rewind gives a file back its owner, group and mode.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// ownerMode returns a backing file's uid, gid and permission bits.
func ownerMode(t *testing.T, p string) (uint32, uint32, os.FileMode) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return st.Uid, st.Gid, os.FileMode(st.Mode & 0o7777)
}

// chownBacking sets a backing file's owner and mode.
func chownBacking(t *testing.T, p string, uid, gid int, mode os.FileMode) {
	t.Helper()
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// allowOtherMount is a mount with allow_other that uid 65534 can reach,
// over root's files: s.txt (0600), gone.txt (0640, uid and gid 1234),
// p/pin (0644 in the 0700 directory p) and pub/secret.txt (0600 in the
// world-writable directory pub).
func allowOtherMount(t *testing.T) *mount {
	t.Helper()
	m := newMount(t, map[string]string{
		"s.txt": "SECRET-OLD\n", "gone.txt": "GONE-SECRET\n", "p/pin": "PIN-4711\n", "pub/secret.txt": "PUB-SECRET\n",
	}, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		// Before the mount: the watcher then has nothing to report.
		ws := func(rel string) string { return filepath.Join(c.Workspace, rel) }
		chownBacking(t, ws("s.txt"), 0, 0, 0o600)
		chownBacking(t, ws("gone.txt"), 1234, 1234, 0o640)
		chownBacking(t, ws("p"), 0, 0, 0o700)
		chownBacking(t, ws("p/pin"), 0, 0, 0o644)
		chownBacking(t, ws("pub"), 0, 0, 0o777)
		chownBacking(t, ws("pub/secret.txt"), 0, 0, 0o600)
		openUp(t, filepath.Dir(c.Workspace))
	})
	return m
}

// TestJournalAsCallerNobody: uid 65534 reads no byte of root's files
// through diff, rewinds none of them, and cannot declare a read of a file
// in a 0700 directory; root still can do all of it.
func TestJournalAsCallerNobody(t *testing.T) {
	m := allowOtherMount(t)
	bin := shq(sharedBin(t))
	// Root's changes through the mount, outside every session.
	// (The guard lets root change only what it read.)
	m.mustSh("cat s.txt gone.txt p/pin pub/secret.txt > /dev/null && echo SECRET-NEW > s.txt && rm gone.txt pub/secret.txt && echo PIN-0000 > p/pin")

	out, _ := m.sh(asNobody + bin + " diff")
	for _, secret := range []string{"SECRET-OLD", "SECRET-NEW", "GONE-SECRET", "PIN-4711", "PIN-0000", "PUB-SECRET"} {
		if strings.Contains(out, secret) {
			t.Errorf("nobody's diff shows %s:\n%s", secret, out)
		}
	}
	out, _ = m.sh(asNobody + bin + " changes --json")
	if h := xxh3Hex([]byte("SECRET-OLD\n")); strings.Contains(out, h) {
		t.Errorf("nobody's changes show the hash of root's s.txt:\n%s", out)
	}

	// Rewinds: s.txt is root's 0600 file in root's 0755 directory, and
	// gone.txt's directory is root's too: nothing may come back.
	// nobody's own session (default-65534) never changed them: nothing
	// to do; root's session (default) is not nobody's to rewind.
	out, err := m.sh(asNobody + bin + " rewind --to cp000000 s.txt gone.txt")
	t.Logf("nobody's rewind of its own session: %v %s", err, out)
	out, err = m.sh(asNobody + bin + " rewind --session default --to cp000000 s.txt gone.txt")
	if err == nil || !strings.Contains(out, `no session "default"`) { // another uid's session is hidden (ENOENT)
		t.Errorf("nobody's rewind of root's session: %v, want a refusal with its reason:\n%s", err, out)
	}
	t.Logf("nobody's rewind: %s", out)
	if got := m.readBacking("s.txt"); got != "SECRET-NEW\n" {
		t.Errorf("nobody's rewind rewrote root's s.txt to %q\n%s", got, out)
	}
	if _, err := os.Lstat(m.backing("gone.txt")); err == nil {
		t.Errorf("nobody's rewind brought root's deleted gone.txt back\n%s", out)
	}
	// pub is world-writable, so nobody could make the name itself: when
	// its rewind may act on root's session at all, pub/secret.txt comes
	// back as it was, root's 0600, never nobody's.
	out, err = m.sh(asNobody + bin + " rewind --session default --to cp000000 pub/secret.txt")
	if _, serr := os.Lstat(m.backing("pub/secret.txt")); serr == nil {
		if uid, gid, mode := ownerMode(t, m.backing("pub/secret.txt")); uid != 0 || gid != 0 || mode != 0o600 {
			t.Errorf("pub/secret.txt came back %d:%d %o, want 0:0 600\n%s", uid, gid, mode, out)
		}
		if got := m.readBacking("pub/secret.txt"); got != "PUB-SECRET\n" {
			t.Errorf("pub/secret.txt came back as %q", got)
		}
	} else if err == nil {
		t.Errorf("nobody's rewind of pub/secret.txt did nothing and said nothing:\n%s", out)
	}

	// A read declaration of a file nobody cannot open.
	out, err = m.sh(asNobody + `sh -c '/bin/echo "read p/pin" > .rubino/self/ctl'`)
	if err == nil || !strings.Contains(out, "Permission denied") {
		e, _ := m.sh("cat .rubino/errors")
		t.Errorf("nobody's read declaration of p/pin: %v, want EACCES\n%s\n%s", err, out, e)
	}
	out, _ = m.sh(asNobody + "cat .rubino/self/tracked")
	if h := xxh3Hex([]byte("PIN-0000\n")); strings.Contains(out, h) {
		t.Errorf("nobody's tracked shows p/pin's hash:\n%s", out)
	}

	// Nobody keeps all of it for its own file.
	m.mustSh(asNobody + "sh -c 'echo MINE-1 > pub/mine.txt && chmod 600 pub/mine.txt'")
	if out := m.mustSh(asNobody + bin + " diff -- pub/mine.txt"); !strings.Contains(out, "+MINE-1") {
		t.Errorf("nobody's diff of its own file lacks its bytes:\n%s", out)
	}
	m.mustSh(asNobody + `sh -c '/bin/echo "read pub/mine.txt" > .rubino/self/ctl'`)
	if out := m.mustSh(asNobody + "cat .rubino/self/tracked"); !strings.Contains(out, xxh3Hex([]byte("MINE-1\n"))) {
		t.Errorf("nobody's tracked lacks its own file's hash:\n%s", out)
	}
	m.mustSh(asNobody + bin + " rewind --to cp000000 pub/mine.txt")
	if _, err := os.Lstat(m.backing("pub/mine.txt")); err == nil {
		t.Errorf("nobody's rewind left its own new file")
	}

	// The owner can do all of it.
	out = m.mustSh(bin + " diff -- s.txt p/pin")
	for _, want := range []string{"SECRET-OLD", "SECRET-NEW", "PIN-4711", "PIN-0000"} {
		if !strings.Contains(out, want) {
			t.Errorf("root's diff lacks %s:\n%s", want, out)
		}
	}
	m.mustSh(`echo "read p/pin" > .rubino/self/ctl`)
	if out := m.mustSh("cat .rubino/self/tracked"); !strings.Contains(out, xxh3Hex([]byte("PIN-0000\n"))) {
		t.Errorf("root's tracked lacks p/pin's hash:\n%s", out)
	}
	m.mustSh(bin + " rewind --to cp000000 s.txt gone.txt")
	if got := m.readBacking("s.txt"); got != "SECRET-OLD\n" {
		t.Errorf("root's rewind left s.txt %q", got)
	}
	if uid, gid, mode := ownerMode(t, m.backing("gone.txt")); uid != 1234 || gid != 1234 || mode != 0o640 {
		t.Errorf("root's rewind brought gone.txt back %d:%d %o, want 1234:1234 640", uid, gid, mode)
	}
}

// TestRewindRestoresOwner: root removes a directory and a file owned by
// another uid; a rewind brings both back with their owner, group and mode,
// not as root's.
func TestRewindRestoresOwner(t *testing.T) {
	m := newMount(t, map[string]string{"d/f": "F\n", "g": "G\n"}, func(c *daemon.Config) {
		chownBacking(t, filepath.Join(c.Workspace, "d"), 1234, 2345, 0o750)
		chownBacking(t, filepath.Join(c.Workspace, "d/f"), 1234, 2345, 0o640)
		chownBacking(t, filepath.Join(c.Workspace, "g"), 1234, 2345, 0o604)
	})
	m.mustSh("cat d/f g > /dev/null && rm -r d && echo changed > g")
	// g is rewritten in place, d and d/f made anew.
	m.mustSh(shq(rubinofsBin(t)) + " rewind --to cp000000")
	for rel, mode := range map[string]os.FileMode{"d": 0o750, "d/f": 0o640, "g": 0o604} {
		if uid, gid, got := ownerMode(t, m.backing(rel)); uid != 1234 || gid != 2345 || got != mode {
			t.Errorf("%s came back %d:%d %o, want 1234:2345 %o", rel, uid, gid, got, mode)
		}
	}
	if got := m.readBacking("d/f"); got != "F\n" {
		t.Errorf("d/f came back %q", got)
	}
}
