package tests

// TestTrustTable checks the trust table of docs/DESIGN.md#trust on a real
// mount: every control file, found by walking .rubino as the mount owner
// (so a control file with no row fails the test), is read and written as
// uid 65534 (setpriv), and each outcome is checked against its row. The
// mount owner's session, task, transcript, journal and guard state hold
// secrets (a 0600 file's content, names in a 0700 directory, a session's
// command line, hashes); none may appear in anything uid 65534 reads. The
// same walk runs again as the owner's own uid inside another session (an
// agent's), which is neither the owner's sessions' own process nor
// outside every session; and the owner, outside every session, reads
// every file.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/daemon"
)

// access is the outcome a row expects of uid 65534.
type access string

const (
	allow  access = "allowed"
	refuse access = "refused" // EPERM, EACCES or ENOENT (an entry the caller may not see)
	// readOnly is a write to a read-only control file: EACCES, for every
	// caller, root included.
	readOnly access = "EACCES"
	// either is a directory of another uid's object: it may be hidden
	// (refused) or listed with its fixed file names (allowed); its files
	// are what the row checks.
	either access = "either"
	// notProbed is a clone file's plain read: its content is the reply
	// on the handle that wrote, nothing else.
	notProbed access = "-"
)

// trustRow is one row of the trust table, as uid 65534 meets it: path is
// a pattern below .rubino, where NAME is any guard session, ID any task
// and TID any compaction transcript; every such object the test finds
// belongs to the mount owner. read and write are what uid 65534 gets;
// each payload is one write attempt (clone files: the spec or request).
// The mount owner itself (admin) may read every file but those only a
// task may read (adminRead: refuse); a process of its uid inside another
// session is neither its session's own process nor outside every
// session, so it gets what uid 65534 gets, but for the transcripts, which
// belong to the uid (sessRead, sessWrite).
type trustRow struct {
	path      string
	kind      string // file, dir or link
	read      access
	write     access
	payloads  []string
	adminRead access // "" is allow
	// sessRead and sessWrite are what a process of the owner's own uid
	// inside another session (an agent's) gets; "" is read and write.
	sessRead, sessWrite access
}

// trustRows is the trust table (docs/DESIGN.md#trust) from uid 65534's
// side, against the mount owner's objects. Payload placeholders: {MNT}
// the mountpoint, {PIN} the 0700 directory's file, {ROOTPID} the root
// process of the owner's session, {TID} the owner's transcript.
var trustRows = []trustRow{
	{path: "README", read: allow, write: readOnly},
	{path: "status", read: allow, write: readOnly},
	{path: "errors", read: allow, write: readOnly},
	{path: "metrics", read: allow, write: readOnly},
	{path: "accesslog", read: allow, write: readOnly},
	{path: "guard", kind: "dir", read: allow},
	{path: "guard/denials", read: allow, write: readOnly},
	{path: "guard/denials.summary", read: allow, write: readOnly},
	{path: "guard/tracked", read: allow, write: readOnly},
	{path: "guard/why", read: allow, write: readOnly},
	{path: "policy", read: refuse, write: refuse, payloads: []string{"reload"}, sessRead: allow},
	{path: "self", kind: "link", read: allow},
	{path: "sessions", kind: "dir", read: allow},
	{path: "sessions/clone", read: notProbed, write: refuse,
		payloads: []string{"join=rootsess", "pid={ROOTPID} name=nb-steal"}},
	{path: "sessions/ctl", read: allow, write: refuse, payloads: []string{"end rootsess", "rename rootsess nb-renamed", "end default"}},
	{path: "sessions/NAME", kind: "dir", read: either},
	{path: "sessions/NAME/info", read: refuse, write: refuse},
	{path: "sessions/NAME/tracked", read: refuse, write: refuse},
	{path: "sessions/NAME/denials", read: refuse, write: refuse},
	{path: "sessions/NAME/denials.summary", read: refuse, write: refuse},
	{path: "sessions/NAME/why", read: refuse, write: refuse},
	{path: "sessions/NAME/ctl", read: refuse, write: refuse, payloads: []string{"read {MNT}/p/{PIN}", "checkpoint nb"}},
	{path: "sessions/NAME/checkpoints", read: refuse, write: refuse},
	{path: "sessions/NAME/changes", read: refuse, write: refuse},
	{path: "sessions/NAME/journal", read: notProbed, write: refuse,
		payloads: []string{"diff", "changes", "rewind --to cp000000 --dry-run", "checkpoint nb"}},
	{path: "sessions/NAME/readtool", read: notProbed, write: refuse,
		payloads: []string{"window {MNT}/pub.txt 0 0", "window {MNT}/pub.txt 1 1", "skeleton {MNT}/pub.txt 1:1"}},
	{path: "agents", kind: "dir", read: allow},
	{path: "agents/README", read: allow, write: readOnly},
	// agents/clone: uid 65534's own task is checked by the spawn probe.
	{path: "agents/clone", read: notProbed, write: notProbed},
	{path: "agents/tree", read: allow, write: readOnly},
	{path: "agents/waiting", read: allow, write: readOnly},
	{path: "agents/ID", kind: "dir", read: either},
	{path: "agents/ID/status", read: refuse, write: refuse},
	{path: "agents/ID/subagent", read: refuse, write: refuse},
	{path: "agents/ID/prompt", read: refuse, write: refuse},
	{path: "agents/ID/owner", read: refuse, write: refuse},
	{path: "agents/ID/depth", read: refuse, write: refuse},
	{path: "agents/ID/started", read: refuse, write: refuse},
	{path: "agents/ID/finished", read: refuse, write: refuse},
	{path: "agents/ID/branch", read: refuse, write: refuse},
	{path: "agents/ID/result", read: refuse, write: refuse},
	{path: "agents/ID/error", read: refuse, write: refuse},
	{path: "agents/ID/activity", read: refuse, write: refuse, payloads: []string{"started nb\n"}},
	{path: "agents/ID/output", read: refuse, write: refuse},
	{path: "agents/ID/log", read: refuse, write: refuse},
	{path: "agents/ID/ctl", read: refuse, write: refuse, payloads: []string{"stop", "steer nb", "probe", "approve yes"}},
	{path: "agents/ID/question", read: refuse, write: refuse},
	{path: "agents/ID/approval", read: refuse, write: refuse},
	{path: "agents/ID/ask", read: refuse, write: refuse},
	{path: "agents/ID/answer", read: refuse, write: refuse, adminRead: refuse},
	{path: "agents/ID/inbox", read: refuse, write: refuse, adminRead: refuse},
	{path: "agents/ID/wait", read: refuse, write: refuse},
	{path: "compact", kind: "dir", read: allow},
	{path: "compact/README", read: allow, write: readOnly},
	{path: "compact/new", read: notProbed, write: allow, payloads: []string{"{}\n"}},
	{path: "compact/resolve", read: notProbed, write: refuse, payloads: []string{"{TID}"}, sessWrite: allow},
	{path: "compact/list", read: allow, write: readOnly},
	{path: "compact/config", read: allow, write: readOnly},
	{path: "compact/sessions", kind: "dir", read: allow},
	{path: "compact/sessions/TID", kind: "dir", read: either, sessRead: allow},
	{path: "compact/sessions/TID/messages", read: refuse, write: refuse, payloads: []string{`{"role":"user","content":"from nobody"}` + "\n"}, sessRead: allow, sessWrite: allow},
	{path: "compact/sessions/TID/status", read: refuse, write: refuse, sessRead: allow},
	{path: "compact/sessions/TID/ctl", read: refuse, write: refuse, payloads: []string{"compact", "force"}, sessRead: allow, sessWrite: allow},
	{path: "compact/sessions/TID/result", read: refuse, write: refuse, sessRead: allow},
	{path: "compact/sessions/TID/summary", read: refuse, write: refuse, sessRead: allow},
	{path: "compact/sessions/TID/lineage", read: refuse, write: refuse, sessRead: allow},
}

// matchRow returns the row whose pattern matches rel (a path below
// .rubino), or nil.
func matchRow(rel string) *trustRow {
	segs := strings.Split(rel, "/")
	for i := range trustRows {
		pat := strings.Split(trustRows[i].path, "/")
		if len(pat) != len(segs) {
			continue
		}
		ok := true
		for j, p := range pat {
			switch p {
			case "NAME", "TID":
			case "ID":
				ok = ok && regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(segs[j])
			default:
				ok = ok && p == segs[j]
			}
		}
		if ok {
			return &trustRows[i]
		}
	}
	return nil
}

// classOf judges an outcome against want.
func classOf(errno string, want access) bool {
	switch want {
	case allow:
		return errno == "ok"
	case refuse:
		return errno == "EPERM" || errno == "EACCES" || errno == "ENOENT"
	case readOnly:
		return errno == "EACCES"
	case either:
		return errno == "ok" || errno == "EPERM" || errno == "EACCES" || errno == "ENOENT"
	}
	return true
}

// docTrustFiles returns the control files the trust table of
// docs/DESIGN.md#trust names: the first cell of each row, whose later
// names are relative to the first one's directory.
func docTrustFiles(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, `<a id="trust"></a>`)
	if i < 0 {
		t.Fatal("docs/DESIGN.md has no trust section (<a id=\"trust\">)")
	}
	doc = doc[i:]
	if j := strings.Index(doc, "\n<a id="); j >= 0 {
		doc = doc[:j]
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "| `") || len(cells) < 3 {
			continue
		}
		var dir string
		for k, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			name := m[1]
			if k == 0 {
				dir = path.Dir(name)
			} else if !strings.Contains(name, "/") && dir != "." {
				name = dir + "/" + name
			}
			out = append(out, name)
		}
	}
	return out
}

func TestTrustTable(t *testing.T) {
	// The test's rows are the document's, file for file.
	var rows []string
	for _, r := range trustRows {
		if r.kind != "dir" {
			rows = append(rows, r.path)
		}
	}
	doc := docTrustFiles(t)
	slices.Sort(rows)
	slices.Sort(doc)
	if !slices.Equal(rows, doc) {
		t.Errorf("the test's rows and the table of docs/DESIGN.md#trust differ:\n test: %v\n  doc: %v", rows, doc)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv (util-linux)")
	}
	tag := fmt.Sprintf("%08x", os.Getpid()*2654435761&0xffffffff)
	pin := "pin-" + tag
	blind := "blind-" + tag
	secrets := map[string]string{
		"the 0600 file's content":            "SECRET0600-" + tag,
		"the 0700 directory's file content":  "PINCONTENT-" + tag,
		"a name in the 0700 directory":       pin,
		"another name in the 0700 directory": blind,
		"the owner session's command line":   "CMDSECRET-" + tag,
		"the owner's task prompt":            "TASKSECRET-" + tag,
		"the owner's transcript":             "TRANSCRIPTSECRET-" + tag,
		"the owner's transcript title":       "TITLESECRET-" + tag,
	}
	m := newMount(t, map[string]string{
		"pub.txt":    "public\n",
		"s.txt":      secrets["the 0600 file's content"] + "\n",
		"p/" + pin:   secrets["the 0700 directory's file content"] + "\n",
		"p/" + blind: "x\n",
	}, func(c *daemon.Config) { c.Options = append(c.Options, "allow_other") })
	openUp(t, m.tmp)
	bin := rubinofsBin(t)
	child := helperBinary(t)
	for rel, mode := range map[string]uint32{"s.txt": 0o600, "p": 0o700} {
		if err := os.Chmod(m.path(rel), os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
	}
	ctl := func(rel string) string { return m.path(".rubino/" + rel) }

	// The mount owner (root, the test process, outside every session):
	// its default session reads and edits the 0600 file, takes a
	// checkpoint, is refused a blind write (a denial naming the 0700
	// directory's file) and fails a read declaration (an error naming it).
	m.mustSh(fmt.Sprintf("cat s.txt >/dev/null && echo default >> s.txt && %s checkpoint --mount %s cp-default >/dev/null", bin, shq(m.mnt)))
	m.mustFail("echo x > p/" + blind)
	if err := os.WriteFile(ctl("self/ctl"), []byte("read "+m.path("p/"+pin+"/none")), 0); err == nil {
		t.Fatal("declaring a read of a path below a file succeeded")
	}

	// A session of the owner, kept alive until the test ends: it read the
	// 0600 file and the 0700 directory's file, edited one, checkpointed.
	script := fmt.Sprintf("cat s.txt p/%s >/dev/null && echo rootsess >> s.txt && %s checkpoint cp-rootsess >/dev/null && : %s && echo READY && read x",
		pin, bin, secrets["the owner session's command line"])
	sess := exec.Command("/bin/sh", "-c", fmt.Sprintf("cd %s && exec %s run --session rootsess -- sh -c %s", shq(m.mnt), bin, shq(script)))
	sess.Dir, sess.Env = m.tmp, testEnv(m.tmp)
	sessIn, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sessOut, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sess.Stderr = os.Stderr
	if err := sess.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sessIn.Close(); sess.Wait() })
	if l, err := bufio.NewReader(sessOut).ReadString('\n'); err != nil || l != "READY\n" {
		t.Fatalf("the owner's session did not start: %q %v", l, err)
	}
	rootPid := fmt.Sprint(sess.Process.Pid)

	// A finished task of the owner, and a transcript.
	taskID := strings.TrimSpace(m.mustSh(fmt.Sprintf("%s agents spawn --mount %s %s", bin, shq(m.mnt), shq("echo "+secrets["the owner's task prompt"]))))
	m.mustSh(fmt.Sprintf("%s agents wait --mount %s %s", bin, shq(m.mnt), taskID))
	tid := ownerClone(t, ctl("compact/new"), `{"title":"`+secrets["the owner's transcript title"]+`"}`+"\n")
	if err := os.WriteFile(ctl("compact/sessions/"+tid+"/messages"),
		[]byte(`{"role":"user","content":"`+secrets["the owner's transcript"]+`"}`+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	secrets["the owner's transcript id"] = tid

	// The hashes the owner's sessions hold (xxh3 of the secret files).
	hexRE := regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	for _, rel := range []string{"sessions/default/tracked", "sessions/rootsess/tracked", "sessions/default/changes", "sessions/rootsess/changes"} {
		b, err := os.ReadFile(ctl(rel))
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hexRE.FindAllString(string(b), -1) {
			if h != tid {
				secrets[fmt.Sprintf("hash %d in the owner's %s", i, rel)] = h
			}
		}
	}

	// Every control file the owner sees has a row, and every row a file.
	var files []trustFound
	used := map[string]bool{}
	err = filepath.WalkDir(ctl(""), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ctl(""), p)
		if rel == "." {
			return nil
		}
		row := matchRow(rel)
		kind := "file"
		if d.IsDir() {
			kind = "dir"
		} else if d.Type()&os.ModeSymlink != 0 {
			kind = "link"
		}
		switch {
		case row == nil:
			t.Errorf("control file .rubino/%s has no row in the trust table (docs/DESIGN.md#trust)", rel)
		case row.kind != "" && row.kind != kind || row.kind == "" && kind != "file":
			t.Errorf(".rubino/%s is a %s; its row %s says %q", rel, kind, row.path, row.kind)
		default:
			used[row.path] = true
			files = append(files, trustFound{rel, row})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The mount owner, outside every session, reads every file (its
	// administration of every session), but a task's own answer and inbox.
	for _, f := range files {
		if f.row.kind != "" || f.row.read == notProbed {
			continue
		}
		want := f.row.adminRead
		if want == "" {
			want = allow
		}
		if r := runTrustOp(trustOp{Op: "read", Path: ctl(f.rel)}); !classOf(r.Errno, want) {
			t.Errorf("row %s: the mount owner's read of .rubino/%s: want %s, got %s", f.row.path, f.rel, want, r.Errno)
		}
	}

	// uid 65534 holds the access log open while the owner makes a file in
	// the 0700 directory (a line naming it) and reads the 0600 file, then
	// takes what reached it.
	hold := startTrustChild(t, child, []trustOp{{Op: "hold", Path: ctl("accesslog")}})
	if l := hold.line(); l != "TRUSTREADY" {
		t.Fatalf("access-log reader: %q", l)
	}
	secrets["a name the owner made in the 0700 directory"] = "made-" + tag
	m.mustSh("echo x > p/made-" + tag + " && cat p/" + pin + " s.txt >/dev/null")
	held := hold.results(t)[0]

	// Then every control file, read first and written after, and the
	// caller's own objects.
	expand := strings.NewReplacer("{MNT}", m.mnt, "{PIN}", pin, "{ROOTPID}", rootPid, "{TID}", tid)
	probes := tableProbes(files, expand, ctl, false)
	// Its own session (self), task and transcript.
	own := []trustProbe{
		{nil, "self/info", "read (own session)", allow, trustOp{Op: "read", Path: ctl("self/info")}},
		{nil, "self/tracked", "read (own session)", allow, trustOp{Op: "read", Path: ctl("self/tracked")}},
		{nil, "self/checkpoints", "read (own session)", allow, trustOp{Op: "read", Path: ctl("self/checkpoints")}},
		{nil, "self/changes", "read (own session)", allow, trustOp{Op: "read", Path: ctl("self/changes")}},
		{nil, "self/journal", "diff (own session)", allow, trustOp{Op: "clone", Path: ctl("self/journal"), Data: "diff"}},
		{nil, "self/ctl", "declare a read of a file it may read", allow, trustOp{Op: "write", Path: ctl("self/ctl"), Data: "read " + m.path("pub.txt")}},
		{nil, "self/ctl", "declare a read of a file in a 0700 directory", refuse, trustOp{Op: "write", Path: ctl("self/ctl"), Data: "read " + m.path("p/"+pin)}},
		{nil, "self/readtool", "ask about a file it may read", allow, trustOp{Op: "clone", Path: ctl("self/readtool"), Data: "window " + m.path("pub.txt") + " 1 1"}},
		{nil, "self/readtool", "ask about a file in a 0700 directory", refuse, trustOp{Op: "clone", Path: ctl("self/readtool"), Data: "window " + m.path("p/"+pin) + " 0 0"}},
		{nil, "self/tracked", "read after the declarations", allow, trustOp{Op: "read", Path: ctl("self/tracked")}},
	}
	ops := make([]trustOp, 0, len(probes)+len(own)+3)
	for _, p := range append(probes, own...) {
		ops = append(ops, p.op)
	}
	ops = append(ops,
		trustOp{Op: "spawn", Path: ctl("agents"), Data: `{"subagent":"sh","prompt":"id -u"}`},
		trustOp{Op: "clone", Path: ctl("compact/new"), Data: "{}\n"},
		trustOp{Op: "readlink", Path: ctl("self")})
	res := startTrustChild(t, child, ops).results(t)

	failed := map[string]bool{}
	fail := func(row, format string, args ...any) {
		failed[row] = true
		t.Errorf("row %s: "+format, append([]any{row}, args...)...)
	}
	for _, r := range trustRows {
		if !used[r.path] {
			fail(r.path, "matched no control file")
		}
	}
	leaks := func(row, what, data string) {
		for name, s := range secrets {
			if s != "" && strings.Contains(data, s) {
				fail(row, "%s: uid 65534 got %s (%q)", what, name, s)
			}
		}
	}
	for i, p := range append(probes, own...) {
		r := res[i]
		row := p.rel
		if p.row != nil {
			row = p.row.path
		}
		if !classOf(r.Errno, p.want) {
			fail(row, ".rubino/%s: %s: want %s, got %s %s", p.rel, p.what, p.want, r.Errno, r.Reason)
		}
		data := r.Data
		if p.rel == "errors" {
			// uid 65534's own records echo the paths it wrote (the
			// transcript id the test gave it): only others' records count.
			data = dropOwnErrorRecords(data)
		}
		leaks(row, ".rubino/"+p.rel+": "+p.what, data)
		if p.op.Op == "readdir" {
			for _, theirs := range []string{"default", "rootsess", "task-" + taskID, taskID, tid} {
				if slices.Contains(strings.Split(r.Data, "\n"), theirs) {
					fail(row, ".rubino/%s lists the owner's %s", p.rel, theirs)
				}
			}
		}
	}
	if !classOf(held.Errno, allow) {
		fail("accesslog", "holding it open: %s", held.Errno)
	}
	leaks("accesslog", "lines served while open", held.Data)

	n := len(probes) + len(own)
	if spawn := res[n]; spawn.Errno == "ok" {
		if got := strings.Fields(spawn.Data); len(got) < 2 || got[0] != "done" || got[1] != "65534" {
			fail("agents/clone", "a task uid 65534 spawned ran `id -u` as %q, want done 65534 (or the spawn refused with a reason)", spawn.Data)
		}
	} else if !classOf(spawn.Errno, refuse) && spawn.Errno != "EOPNOTSUPP" {
		fail("agents/clone", "spawn: %s %s", spawn.Errno, spawn.Reason)
	}
	if r := res[n+1]; r.Errno != "ok" {
		fail("compact/new", "uid 65534 could not make its own transcript: %s %s", r.Errno, r.Reason)
	}
	if r := res[n+2]; r.Data != "sessions/default-65534" {
		fail("self", "uid 65534 outside every session points at %q, want sessions/default-65534 (its own uid's default session)", r.Data)
	}

	// A process of the owner's uid inside another session (an agent's):
	// the owner's default session, its other session and its task are not
	// its own; the owner's transcript is its uid's.
	sessProbes := tableProbes(files, expand, ctl, true)
	ops = ops[:0]
	for _, p := range sessProbes {
		ops = append(ops, p.op)
	}
	agent := startTrustChildAs(t, child, ops, bin, "run", "--mount", m.mnt, "--session", "agentsess", "--")
	for i, r := range agent.results(t) {
		p := sessProbes[i]
		if !classOf(r.Errno, p.want) {
			fail(p.row.path, "in another session of the owner's uid: .rubino/%s: %s: want %s, got %s %s", p.rel, p.what, p.want, r.Errno, r.Reason)
		}
		if p.op.Op == "readdir" {
			for _, theirs := range []string{"default", "rootsess", "task-" + taskID, taskID} {
				if slices.Contains(strings.Split(r.Data, "\n"), theirs) {
					fail(p.row.path, "in another session of the owner's uid: .rubino/%s lists %s", p.rel, theirs)
				}
			}
		}
	}

	// The owner's state is as it was.
	if b, err := os.ReadFile(m.backing("s.txt")); err != nil || !strings.Contains(string(b), secrets["the 0600 file's content"]) {
		t.Errorf("the 0600 file changed: %q %v", b, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(m.backing("s.txt"), &st); err != nil || st.Uid != 0 || st.Mode&0o777 != 0o600 {
		t.Errorf("the 0600 file's owner or mode changed: uid %d mode %o %v", st.Uid, st.Mode&0o777, err)
	}
	if t.Failed() {
		var rows []string
		for r := range failed {
			rows = append(rows, r)
		}
		slices.Sort(rows)
		t.Logf("rows that fail: %s", strings.Join(rows, ", "))
	}
}

// ownerClone writes spec to the clone file p as the test process (the
// mount owner) and returns the reply read from the same handle.
func ownerClone(t *testing.T, p, spec string) string {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte(spec)); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	return strings.TrimSpace(string(b[:n]))
}

// trustFound is a control file the walk found, and its row.
type trustFound struct {
	rel string
	row *trustRow
}

// trustProbe is one operation of the child and the outcome its row wants.
type trustProbe struct {
	row  *trustRow
	rel  string
	what string
	want access
	op   trustOp
}

// tableProbes lists, for every control file found, a read (a listing for
// a directory, readlink for a link) and then a write per payload; want is
// the row's read and write, or with inSession its sessRead and sessWrite.
// expand fills the payloads' placeholders; ctl maps a path below .rubino
// to its absolute path.
func tableProbes(files []trustFound, expand *strings.Replacer, ctl func(string) string, inSession bool) []trustProbe {
	var probes []trustProbe
	for _, f := range files {
		op := "read"
		switch f.row.kind {
		case "dir":
			op = "readdir"
		case "link":
			op = "readlink"
		}
		want := f.row.read
		if inSession && f.row.sessRead != "" {
			want = f.row.sessRead
		}
		if f.row.read != notProbed {
			probes = append(probes, trustProbe{f.row, f.rel, op, want, trustOp{Op: op, Path: ctl(f.rel)}})
		}
	}
	for _, f := range files {
		if f.row.kind != "" || f.row.write == notProbed {
			continue
		}
		want := f.row.write
		if inSession && f.row.sessWrite != "" {
			want = f.row.sessWrite
		}
		payloads := f.row.payloads
		if len(payloads) == 0 {
			payloads = []string{"x\n"}
		}
		for _, pl := range payloads {
			op := "write"
			if slices.Contains([]string{"sessions/clone", "sessions/NAME/journal", "sessions/NAME/readtool", "compact/new", "compact/resolve"}, f.row.path) {
				op = "clone"
			}
			probes = append(probes, trustProbe{f.row, f.rel, "write " + strings.TrimSpace(expand.Replace(pl)), want, trustOp{Op: op, Path: ctl(f.rel), Data: expand.Replace(pl)}})
		}
	}
	return probes
}

// dropOwnErrorRecords removes from a read of .rubino/errors (JSON lines)
// the records of uid 65534's own default session.
func dropOwnErrorRecords(data string) string {
	var keep []string
	for _, line := range strings.Split(data, "\n") {
		if !strings.Contains(line, `"session":"default-65534"`) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
