package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/journal"
)

// withJournal turns the change journal on with the CLI's defaults, as
// shipped: newMount calls it before a test's adjust.
func withJournal(c *daemon.Config) {
	c.Journal = config.Journal{Enabled: true, MaxFileSize: config.DefaultJournalMaxFileSize,
		Budget: config.DefaultJournalBudget, BudgetPerUID: config.DefaultJournalBudgetPerUID,
		BudgetOtherUIDs: config.DefaultJournalBudgetOtherUIDs, Retention: config.DefaultJournalRetention}
}

// withoutJournal turns the change journal off, in a test's adjust (the
// opt-out from newMount's default): say in the test why it needs it off.
func withoutJournal(c *daemon.Config) { c.Journal = config.Journal{} }

// journalRecords reads session's log from the state directory.
func (m *mount) journalRecords(session string) []journal.Record {
	m.t.Helper()
	recs, _, err := journal.ReadLog(filepath.Join(m.state, "journal", "sessions", session+".jsonl"))
	if err != nil {
		m.t.Fatalf("reading the journal of %s: %v", session, err)
	}
	return recs
}

// findRecord returns the first change record of op on path (and path2
// when not ""), or fails the test listing the records.
func findRecord(t *testing.T, recs []journal.Record, op, path, path2 string) journal.Record {
	t.Helper()
	for _, r := range recs {
		if r.Op == op && r.Path == path && (path2 == "" || r.Path2 == path2) {
			return r
		}
	}
	t.Fatalf("no %s record of %s %s in:\n%s", op, path, path2, dumpRecords(recs))
	return journal.Record{}
}

func dumpRecords(recs []journal.Record) string {
	var b strings.Builder
	for _, r := range recs {
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// preOf returns rec's pre-image of path, or fails.
func preOf(t *testing.T, rec journal.Record, path string) journal.PreImage {
	t.Helper()
	for _, p := range rec.Pre {
		if p.Path == path {
			return p
		}
	}
	t.Fatalf("record %d (%s %s) has no pre-image of %s: %+v", rec.Seq, rec.Op, rec.Path, path, rec.Pre)
	return journal.PreImage{}
}

// blobBytes reads a pre-image's blob from the state directory.
func (m *mount) blobBytes(pre journal.PreImage) string {
	m.t.Helper()
	if pre.Blob == "" {
		m.t.Fatalf("pre-image of %s has no blob: %+v", pre.Path, pre)
	}
	b, err := os.ReadFile(filepath.Join(m.state, "journal", "blobs", pre.Blob[:2], pre.Blob[2:]))
	if err != nil {
		m.t.Fatal(err)
	}
	return string(b)
}

// TestJournalRecordBashOps: a session's shell commands through the mount
// (echo >>, sed -i, mv, rm, mkdir -p, chmod +x, ln, ln -s, a new file, cp
// over) are journaled under the session with their pre-images; .git/ and
// git-ignored paths are not; the control tree lists the checkpoints and a
// ctl checkpoint starts a new interval.
func TestJournalRecordBashOps(t *testing.T) {
	m := newMount(t, map[string]string{
		"f": "one\n", "s": "alpha\n", "mv-src": "moved\n", "rm-me": "gone\n", "cp-dst": "old\n",
		"cp-src": "new\n", "lnk": "l\n", "run.sh": "echo hi\n", ".gitignore": "build/\n*.log\n",
	}, withJournal)
	m.mustSh("git init -q . && mkdir -p build")
	a := m.startAgent("jr")
	a.ok("cat f >/dev/null && echo two >> f")
	a.ok("sed -i s/alpha/beta/ s")
	a.ok("mv mv-src mv-dst")
	a.ok("cat rm-me >/dev/null && rm rm-me")
	a.ok("mkdir -p d1/d2 && echo n > d1/d2/new")
	a.ok("chmod +x run.sh")
	a.ok("ln lnk hard && ln -s f soft")
	a.ok("cat cp-dst >/dev/null && cp cp-src cp-dst")
	a.ok("echo ignored > build/out && echo x > x.log && git add f")

	recs := m.journalRecords("jr")
	if recs[0].Op != journal.OpCheckpoint || recs[0].ID != "cp000000" {
		t.Fatalf("the log does not start with the implicit checkpoint:\n%s", dumpRecords(recs))
	}
	w := findRecord(t, recs, "write", "f", "")
	if got := m.blobBytes(preOf(t, w, "f")); got != "one\n" {
		t.Fatalf("pre-image of f = %q, want the bytes before the append", got)
	}
	// sed -i writes a temporary file and renames it over s.
	var sedRename journal.Record
	for _, r := range recs {
		if r.Op == "rename" && r.Path2 == "s" {
			sedRename = r
		}
	}
	if sedRename.Seq == 0 {
		t.Fatalf("no rename over s by sed -i:\n%s", dumpRecords(recs))
	}
	if got := m.blobBytes(preOf(t, sedRename, "s")); got != "alpha\n" {
		t.Fatalf("pre-image of s = %q", got)
	}
	mv := findRecord(t, recs, "rename", "mv-src", "mv-dst")
	if p := preOf(t, mv, "mv-dst"); p.Kind != journal.KindAbsent {
		t.Fatalf("mv's target pre-image = %+v, want absent", p)
	}
	if got := m.blobBytes(preOf(t, findRecord(t, recs, "unlink", "rm-me", ""), "rm-me")); got != "gone\n" {
		t.Fatalf("pre-image of rm-me = %q", got)
	}
	for _, p := range []string{"d1", "d1/d2"} {
		if pre := preOf(t, findRecord(t, recs, "mkdir", p, ""), p); pre.Kind != journal.KindAbsent {
			t.Fatalf("mkdir %s pre-image = %+v", p, pre)
		}
	}
	findRecord(t, recs, "create", "d1/d2/new", "")
	if pre := preOf(t, findRecord(t, recs, "chmod", "run.sh", ""), "run.sh"); pre.Mode&0o111 != 0 || m.blobBytes(pre) != "echo hi\n" {
		t.Fatalf("chmod's pre-image = %+v", pre)
	}
	findRecord(t, recs, "link", "lnk", "hard")
	findRecord(t, recs, "symlink", "soft", "")
	cp := findRecord(t, recs, "truncate", "cp-dst", "")
	if got := m.blobBytes(preOf(t, cp, "cp-dst")); got != "old\n" {
		t.Fatalf("pre-image of cp-dst = %q", got)
	}
	for _, r := range recs {
		for _, p := range []string{r.Path, r.Path2} {
			if strings.HasPrefix(p, ".git/") || strings.HasPrefix(p, "build/") || strings.HasSuffix(p, ".log") || strings.HasPrefix(p, ".rubino") {
				t.Fatalf("journaled an excluded path %s:\n%s", p, dumpRecords(recs))
			}
		}
	}

	// The control tree: checkpoints, a new interval by ctl.
	cps := m.readMount(".rubino/sessions/jr/checkpoints")
	if !strings.Contains(cps, `"id":"cp000000"`) || !strings.Contains(cps, `"label":"session start"`) {
		t.Fatalf("checkpoints = %q", cps)
	}
	a.ok("echo checkpoint before second > .rubino/self/ctl")
	a.ok("cat f >/dev/null && echo three >> f")
	recs = m.journalRecords("jr")
	var cp1 int = -1
	for i, r := range recs {
		if r.Op == journal.OpCheckpoint && r.ID == "cp000001" {
			if r.Label != "before second" {
				t.Fatalf("checkpoint label = %q", r.Label)
			}
			cp1 = i
		}
	}
	if cp1 < 0 {
		t.Fatalf("no cp000001 after the ctl command:\n%s", dumpRecords(recs))
	}
	w2 := findRecord(t, recs[cp1:], "write", "f", "")
	if got := m.blobBytes(preOf(t, w2, "f")); got != "one\ntwo\n" {
		t.Fatalf("pre-image of f in the new interval = %q", got)
	}
	if cps := m.readMount(".rubino/sessions/jr/checkpoints"); !strings.Contains(cps, `"id":"cp000001"`) {
		t.Fatalf("checkpoints = %q", cps)
	}
	// The request file: a checkpoint's id comes back on the same handle.
	if id := m.journalRequest("jr", "checkpoint third"); id != "cp000002\n" {
		t.Fatalf("checkpoint request = %q", id)
	}
}

// readMount reads rel through the mount.
func (m *mount) readMount(rel string) string {
	m.t.Helper()
	b, err := os.ReadFile(m.path(rel))
	if err != nil {
		m.t.Fatal(err)
	}
	return string(b)
}

// journalRequest writes req to .rubino/sessions/NAME/journal and reads
// the reply from offset 0 of the same handle, as the mount's owner.
func (m *mount) journalRequest(session, req string) string {
	m.t.Helper()
	f, err := os.OpenFile(m.path(".rubino/sessions/"+session+"/journal"), os.O_RDWR, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte(req + "\n")); err != nil {
		m.t.Fatalf("%s: %v", req, err)
	}
	var b bytes.Buffer
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		b.Write(buf[:n])
		off += int64(n)
		if n == 0 || err != nil {
			break
		}
	}
	return b.String()
}

// TestJournalRecordOff: with the journal off nothing is written under
// STATE/journal, and the journal's control files answer EOPNOTSUPP.
func TestJournalRecordOff(t *testing.T) {
	m := newMount(t, map[string]string{"f": "one\n"}, withoutJournal)
	a := m.startAgent("off")
	a.ok("cat f >/dev/null && echo two >> f && mkdir d && mv f d/f")
	if _, err := os.Stat(filepath.Join(m.state, "journal")); !os.IsNotExist(err) {
		t.Fatalf("STATE/journal exists with the journal off: %v", err)
	}
	if errno, reply := m.ctlWrite(".rubino/sessions/off/journal", []byte("checkpoint x\n")); errno != syscall.EOPNOTSUPP ||
		!strings.Contains(reply, "the journal is off (--journal=false)") {
		t.Fatalf("checkpoint with the journal off: %v %q, want EOPNOTSUPP", errno, reply)
	}
	// The CLI's flag, over its default (on).
	c := cliDirs(t, map[string]string{"f": "one\n"})
	c.mountDaemon("--journal=false")
	if out, code := c.sh("cat f >/dev/null && echo two >> f && mkdir d && mv f d/f"); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(c.state, "journal")); !os.IsNotExist(err) {
		t.Fatalf("STATE/journal exists with --journal=false: %v", err)
	}
}

// TestJournalRecordCtlErrors: the journal's control files refuse another
// session (EPERM), a bad option (EINVAL naming it) and an unknown
// checkpoint (ENOENT), each with its reason on the handle.
func TestJournalRecordCtlErrors(t *testing.T) {
	m := newMount(t, map[string]string{"f": "one\n"}, withJournal)
	a := m.startAgent("ja")
	b := m.startAgent("jb")
	a.ok("cat f >/dev/null && echo two >> f")
	b.refused("echo checkpoint stolen > .rubino/sessions/ja/ctl")
	b.refused("echo 'rewind cp000000' > .rubino/sessions/ja/ctl")
	for _, c := range []struct {
		req   string
		errno syscall.Errno
		want  string
	}{
		{"rewind --to cp000000 --bogus", syscall.EINVAL, `unknown option "--bogus"`},
		{"rewind --force", syscall.EINVAL, "--to CP is required"},
		{"diff --since", syscall.EINVAL, "--since needs a checkpoint id"},
		{"rewind --to cp999999", syscall.ENOENT, `no checkpoint "cp999999"`},
		{"changes --since nope", syscall.ENOENT, `no checkpoint "nope"`},
		{"frobnicate", syscall.EINVAL, "unknown request"},
	} {
		if errno, reply := m.ctlWrite(".rubino/sessions/ja/journal", []byte(c.req+"\n")); errno != c.errno || !strings.Contains(reply, c.want) {
			t.Errorf("%s: %v %q, want %v and %q", c.req, errno, reply, c.errno, c.want)
		}
	}
	if recs := m.journalRecords("ja"); recs[len(recs)-1].Op == journal.OpCheckpoint {
		t.Fatalf("another session took a checkpoint of ja:\n%s", dumpRecords(recs))
	}
	// The mount's owner, from outside every session, may.
	if id := m.journalRequest("ja", `checkpoint "by the owner"`); id != "cp000001\n" {
		t.Fatalf("owner's checkpoint = %q", id)
	}
	if cps := m.readMount(".rubino/sessions/ja/checkpoints"); !strings.Contains(cps, `"label":"by the owner"`) {
		t.Fatalf("checkpoints = %q", cps)
	}
}

// TestJournalRecordKill9: a daemon killed with SIGKILL right after a
// session's write returned leaves that write's record, with its complete
// blob, in STATE (checked before any remount).
func TestJournalRecordKill9(t *testing.T) {
	c := cliDirs(t, map[string]string{"f": "before the kill\n"})
	c.mountDaemon() // the CLI's default: the journal is on
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
	w := findRecord(t, recs, "write", "f", "")
	pre := preOf(t, w, "f")
	b, err := os.ReadFile(filepath.Join(c.state, "journal", "blobs", pre.Blob[:2], pre.Blob[2:]))
	if err != nil || string(b) != "before the kill\n" {
		t.Fatalf("blob of the acknowledged write: %q, %v", b, err)
	}
}

// TestJournalRecordHandleAcrossCheckpoint: a handle kept open across a
// checkpoint records its next write in the new interval, with the file's
// pre-image as the checkpoint found it.
func TestJournalRecordHandleAcrossCheckpoint(t *testing.T) {
	m := newMount(t, map[string]string{"f": "one\n"}, withJournal)
	a := m.startAgent("jh")
	a.ok("cat f >/dev/null && exec 7>>f && echo two >&7")
	a.ok("echo checkpoint mid > .rubino/self/ctl")
	a.ok("echo three >&7 && exec 7>&-")
	recs := m.journalRecords("jh")
	cp := -1
	for i, r := range recs {
		if r.Op == journal.OpCheckpoint && r.Label == "mid" {
			cp = i
		}
	}
	if cp < 0 {
		t.Fatalf("no checkpoint mid:\n%s", dumpRecords(recs))
	}
	w := findRecord(t, recs[cp:], "write", "f", "")
	if got := m.blobBytes(preOf(t, w, "f")); got != "one\ntwo\n" {
		t.Fatalf("pre-image of f after the checkpoint = %q, want %q", got, "one\ntwo\n")
	}
}
