package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// shareJournal opens a journal with opt, its clock stopped at now
// (returned), owners' uids (OwnerOf) and uid 0 exempt, over a temporary
// workspace. write makes a 30 KiB file there of bytes of its own and
// records its rewrite by session s, capturing its pre-image through s's
// share. The journal is closed at the test's end.
func shareJournal(t *testing.T, opt Options, owners map[string]uint32) (*Journal, time.Time, func(s string) (Record, error)) {
	t.Helper()
	ws := t.TempDir()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	opt.Now = func() time.Time { return now }
	opt.OwnerOf = func(s string) (uint32, bool) { uid, ok := owners[s]; return uid, ok }
	opt.Exempt = func(uid uint32) bool { return uid == 0 }
	j, err := Open(filepath.Join(t.TempDir(), "journal"), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	dirfd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(dirfd) })
	n := 0
	write := func(s string) (Record, error) {
		n++
		name := fmt.Sprintf("f%03d", n)
		if err := os.WriteFile(filepath.Join(ws, name), bytes.Repeat([]byte{byte(n)}, 30<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		sh := j.ShareOf(s)
		return j.Record(s, "write", name, "", func(p string) (PreImage, error) {
			return CaptureWith(j.Blobs(), dirfd, p, CaptureOptions{Share: sh})
		})
	}
	return j, now, write
}

// TestOwnerShare: the sessions of a bounded uid together hold at most
// OwnerBudget bytes of the journal: past it their pre-images are
// unrecoverable and their journals stop, while an unbounded session's
// journal goes on storing blobs; GC removes the uid's ended sessions to
// bring it back under its share (by the uid their logs name, once the
// registry has forgotten them), and a checkpoint then restarts its live
// session's journal.
func TestOwnerShare(t *testing.T) {
	owners := map[string]uint32{"a": 1000, "b": 1000, "mine": 0}
	j, now, write := shareJournal(t, Options{Budget: 64 << 20, OwnerBudget: 100 << 10}, owners)
	if j.ShareOf("mine") != nil || j.ShareOf("a") != j.ShareOf("b") || j.ShareOf("a") == nil {
		t.Fatal("ShareOf: want no share for an unbounded session and one share for one uid's sessions")
	}
	for i := 0; i < 3; i++ {
		rec, err := write([]string{"a", "b"}[i%2])
		if err != nil || len(rec.Pre) != 1 || rec.Pre[0].Blob == "" {
			t.Fatalf("write %d under the share: %+v %v", i, rec, err)
		}
	}
	rec, err := write("a")
	if err != nil || len(rec.Pre) != 1 || rec.Pre[0].Unrecoverable != UnrecoverableOverBudget {
		t.Fatalf("a pre-image past uid 1000's share: %+v %v", rec, err)
	}
	if used := j.ShareOf("a").Used(); used > 100<<10 {
		t.Fatalf("the share holds %d bytes, past its limit", used)
	}
	// Fill it with records until it is spent, then both sessions stop.
	for i := 0; i < 1000 && j.Stopped("b") == ""; i++ {
		if _, err := j.Record("b", "create", fmt.Sprintf("new%04d", i), "", absentCapture); err != nil && !errors.Is(err, ErrStopped) {
			t.Fatal(err)
		}
	}
	if _, err := write("a"); !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "uid 1000's share of the journal budget, 102400 bytes, is spent") {
		t.Fatalf("a session of a spent share: %v", err)
	}
	if uid, used := j.MostByOneUID(); uid != 1000 || used < 100<<10 {
		t.Fatalf("MostByOneUID = %d, %d", uid, used)
	}
	// The unbounded session is not stopped: its blob is stored.
	for i := 0; i < 4; i++ {
		rec, err := write("mine")
		if err != nil || rec.Pre[0].Blob == "" {
			t.Fatalf("the owner's session after uid 1000's share is spent: %+v %v", rec, err)
		}
	}
	// GC removes the ended session of uid 1000, and the live one
	// restarts at its next checkpoint.
	if err := j.End("a", now); err != nil {
		t.Fatal(err)
	}
	// The registry forgets ended sessions (it lists the last 64): the log
	// names its uid itself.
	delete(owners, "a")
	res, err := j.GC(GCOptions{Budget: 64 << 20})
	if err != nil || res.Sessions != 1 {
		t.Fatalf("GC: %+v %v", res, err)
	}
	if _, err := os.Stat(j.LogPath("a")); !os.IsNotExist(err) {
		t.Fatalf("the ended session's log is kept: %v", err)
	}
	if _, err := os.Stat(j.LogPath("mine")); err != nil {
		t.Fatalf("the unbounded session's log: %v", err)
	}
	if used := j.ShareOf("b").Used(); used >= 100<<10 {
		t.Fatalf("after GC the share holds %d bytes", used)
	}
	if _, err := j.Checkpoint("b", "room again"); err != nil {
		t.Fatal(err)
	}
	if rec, err := write("b"); err != nil || rec.Pre[0].Blob == "" || j.Stopped("b") != "" {
		t.Fatalf("after a checkpoint under the share: %+v %v", rec, err)
	}
}

// TestLogOwnerAndReuse: a log's first record names its session's uid
// (LogOwner), one of a session whose uid is not known names none; a log
// whose session ended is collected past retention even when records
// followed the end (a checkpoint of a rewind, a late handle's write),
// unless Live says a session of the name is live again.
func TestLogOwnerAndReuse(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	live := map[string]bool{}
	j, err := Open(filepath.Join(t.TempDir(), "journal"), Options{Now: func() time.Time { return now },
		OwnerOf: func(s string) (uint32, bool) { return 42, s == "known" },
		Live:    func(s string) bool { return live[s] }})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, s := range []string{"known", "unknown"} {
		if _, err := j.Record(s, "create", "f-"+s, "", absentCapture); err != nil {
			t.Fatal(err)
		}
	}
	if uid, known, exists := j.LogOwner("known"); uid != 42 || !known || !exists {
		t.Fatalf("LogOwner(known) = %d %v %v", uid, known, exists)
	}
	if _, known, exists := j.LogOwner("unknown"); known || !exists {
		t.Fatalf("LogOwner(unknown) = %v %v", known, exists)
	}
	if _, _, exists := j.LogOwner("none"); exists {
		t.Fatal("LogOwner of a session without a log")
	}
	if err := j.End("known", now); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record("known", "create", "again", "", absentCapture); err != nil {
		t.Fatal(err)
	}
	now = now.Add(30 * 24 * time.Hour)
	live["known"] = true
	if res, err := j.GC(GCOptions{Retention: time.Hour}); err != nil || res.Sessions != 0 {
		t.Fatalf("GC of the log of a live session of the name: %+v %v", res, err)
	}
	live["known"] = false
	if _, err := j.Checkpoint("known", "a rewind's"); err != nil {
		t.Fatal(err)
	}
	if res, err := j.GC(GCOptions{Retention: time.Hour}); err != nil || res.Sessions != 1 {
		t.Fatalf("GC of an ended session's log with records after its end: %+v %v", res, err)
	}
}

// TestOthersShare: uids 1000 and 1001, each under its own share, together
// pass the share of all bounded uids: the later pre-images are
// unrecoverable and both uids' sessions stop with that reason, while the
// owner's session goes on storing blobs. GC then removes the ended
// session that ended first, whoever's, until they are back under it.
func TestOthersShare(t *testing.T) {
	owners := map[string]uint32{"a": 1000, "b": 1001, "mine": 0}
	j, now, write := shareJournal(t, Options{Budget: 64 << 20, OwnerBudget: 100 << 10, OthersBudget: 150 << 10}, owners)
	kept := 0
	for i := 0; i < 6; i++ { // 3 × 30 KiB each, under 100 KiB per uid; 180 KiB together
		rec, err := write([]string{"a", "b"}[i%2])
		if err != nil {
			t.Fatal(err)
		}
		if rec.Pre[0].Blob != "" {
			kept++
		}
	}
	if kept != 4 {
		t.Fatalf("kept %d pre-images of uids 1000 and 1001, want 4 (150 KiB of 30 KiB files and their records)", kept)
	}
	if o := j.Others(); o.Used() > o.Limit() {
		t.Fatalf("the others' share holds %d bytes, past %d", o.Used(), o.Limit())
	}
	for i := 0; i < 1000 && j.Stopped("a") == ""; i++ {
		if _, err := j.Record("a", "create", fmt.Sprintf("new%04d", i), "", absentCapture); err != nil && !errors.Is(err, ErrStopped) {
			t.Fatal(err)
		}
	}
	if _, err := write("b"); !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "uids other than the mount's owner and root hold together, 153600 bytes, is spent") {
		t.Fatalf("uid 1001's session once the others' share is spent: %v", err)
	}
	if rec, err := write("mine"); err != nil || rec.Pre[0].Blob == "" {
		t.Fatalf("the owner's session: %+v %v", rec, err)
	}
	if err := j.End("b", now); err != nil {
		t.Fatal(err)
	}
	if res, err := j.GC(GCOptions{Budget: 64 << 20}); err != nil || res.Sessions != 1 {
		t.Fatalf("GC: %+v %v", res, err)
	}
	if o := j.Others(); o.Used() >= o.Limit() {
		t.Fatalf("after GC the others' share holds %d of %d bytes", o.Used(), o.Limit())
	}
}
