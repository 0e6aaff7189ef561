package tests

// A rewind restores a special file as what it was (docs/DESIGN.md#journal-rewind).

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestJournalRewindFifo: a named pipe the session removed comes back from
// a rewind as a named pipe with its permission bits, byte for byte in the
// manifest, in the backing directory and through the mount (the mount's
// applier made an empty regular file of it).
func TestJournalRewindFifo(t *testing.T) {
	m := journalMount(t, "--watch=false")
	pipe := filepath.Join(m.ws, "pipe")
	if err := syscall.Mkfifo(pipe, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pipe, 0o640); err != nil {
		t.Fatal(err)
	}
	before := manifest(t, m.ws, "build")
	s := m.startSession("agent")
	s.must("rm pipe")
	if _, err := os.Lstat(pipe); !os.IsNotExist(err) {
		t.Fatalf("pipe after rm: %v", err)
	}
	out := s.must("rubinofs rewind --to cp000000")
	if _, _, conflicts, unrec := rewindCounts(t, out); conflicts != 0 || unrec != 0 {
		t.Fatalf("rewind: %d conflicts, %d unrecoverable\n%s", conflicts, unrec, out)
	}
	fi, err := os.Lstat(pipe)
	if err != nil || fi.Mode().Type() != os.ModeNamedPipe || fi.Mode().Perm() != 0o640 {
		t.Errorf("pipe after the rewind: %v %v, want a named pipe 0640", fi.Mode(), err)
	}
	sameManifest(t, "after the rewind", before, manifest(t, m.ws, "build"))
	sameManifest(t, "after the rewind (through the mount)", before, manifest(t, m.mnt, "build"))
}
