package journal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// crashChild is set in the child process TestKill9KeepsAcknowledgedRecords
// starts: the journal directory it appends to until it is killed.
const crashChild = "RUBINOFS_JOURNAL_CRASH_CHILD"

// crashChildSync is the child's journal.sync ("" or "write": the default).
const crashChildSync = "RUBINOFS_JOURNAL_CRASH_SYNC"

// TestCrashChild is the child: it records changes without end and prints
// each record's seq once Record has returned (so once it is durable).
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChild)
	if dir == "" {
		t.Skip("only run as the child of TestKill9KeepsAcknowledgedRecords")
	}
	mode, err := ParseSyncMode(os.Getenv(crashChildSync))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	j, err := Open(dir, Options{Sync: mode})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	ws := filepath.Join(dir, "..", "ws")
	fd, err := os.Open(ws)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	c := func(p string) (PreImage, error) { return CaptureAt(j.Blobs(), int(fd.Fd()), p) }
	for i := 0; ; i++ {
		r, err := j.Record("s", "write", fmt.Sprintf("f%d", i%5), "", c)
		if err != nil {
			fmt.Println("error", err)
			return
		}
		if i%7 == 6 {
			if _, err := j.Checkpoint("s", "c"); err != nil {
				fmt.Println("error", err)
				return
			}
		}
		fmt.Println(r.Seq)
	}
}

// killedAppender starts TestCrashChild (with env added to its
// environment) appending to a journal in a fresh directory, kills it with
// SIGKILL once it has acknowledged at least n records, and returns the
// journal directory and the last acknowledged seq.
func killedAppender(t *testing.T, n uint64, env ...string) (dir string, acked uint64) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "journal")
	os.Mkdir(filepath.Join(root, "ws"), 0o700)
	for i := 0; i < 5; i++ {
		writeFile(t, filepath.Join(root, "ws", fmt.Sprintf("f%d", i)), []byte(fmt.Sprint("content ", i)))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), crashChild+"="+dir), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for acked < n && sc.Scan() {
		v, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child said %q", sc.Text())
		}
		acked = v
	}
	cmd.Process.Kill() // SIGKILL, by the pid this test started
	cmd.Wait()
	if acked < n {
		t.Fatalf("child stopped after seq %d", acked)
	}
	return dir, acked
}

// A kill -9 of a process appending to a log loses no acknowledged record,
// and the reopened log appends after them with the next seq.
func TestKill9KeepsAcknowledgedRecords(t *testing.T) {
	dir, acked := killedAppender(t, 200)
	j := openJ(t, dir)
	recs, err := j.Records("s")
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(recs)) < acked {
		t.Fatalf("%d records after the kill, %d were acknowledged", len(recs), acked)
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
		for _, p := range r.Pre {
			if p.Blob == "" {
				continue
			}
			f, err := j.Blobs().Open(p.Blob)
			if err != nil {
				t.Fatalf("record %d names a missing blob: %v", r.Seq, err)
			}
			f.Close()
		}
	}
	r, err := j.Checkpoint("s", "after the crash")
	if err != nil || r.Seq != uint64(len(recs))+1 {
		t.Fatalf("append after reopen: %+v %v", r, err)
	}
}

// The kill -9 test in SyncFsync mode (the test above runs the default,
// SyncWrite): a killed appender loses no acknowledged record, and every
// blob a record names is complete.
func TestKill9KeepsAcknowledgedRecordsFsync(t *testing.T) {
	dir, acked := killedAppender(t, 100, crashChildSync+"=fsync")
	j := openJ(t, dir)
	recs, err := j.Records("s")
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(recs)) < acked {
		t.Fatalf("%d records after the kill, %d were acknowledged", len(recs), acked)
	}
	for _, r := range recs {
		for _, p := range r.Pre {
			if p.Blob != "" {
				if err := j.Blobs().Check(p.Blob, p.Size); err != nil {
					t.Fatalf("record %d: %v", r.Seq, err)
				}
			}
		}
	}
}
