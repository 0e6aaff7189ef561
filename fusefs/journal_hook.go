package fusefs

// The change journal's hook in the mutation path
// (docs/DESIGN.md#journal-hook) lives in internal/journalhook: FS.mutate
// records every change by name through journalRecord, a writable handle
// through its *journalhook.Handle. Here: the op names the mutations use,
// and what the hook sees of the mount (journalMount).

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/journalhook"
)

// Journal ops a mutation records (journal.Record's op): the change a
// session made, as the rewind undoes it.
const (
	jCreate   = journalhook.OpCreate
	jWrite    = journalhook.OpWrite
	jTruncate = journalhook.OpTruncate
	jUnlink   = journalhook.OpUnlink
	jRename   = journalhook.OpRename
	jExchange = journalhook.OpExchange
	jMkdir    = journalhook.OpMkdir
	jRmdir    = journalhook.OpRmdir
	jTimes    = journalhook.OpTimes // noted, not recorded (journalNote)
	jChmod    = journalhook.OpChmod
	jSymlink  = journalhook.OpSymlink
	jLink     = journalhook.OpLink
	jMknod    = journalhook.OpMknod
)

// journalRecord records m (op m.jop) for session before its backing
// operation, with the pre-images taken through the parent directories the
// lock step holds (gs[i].at; the hook opens the others): mutate's one
// journal step (docs/DESIGN.md#mutation-path, step 4a). The caller runs
// the backing operation, then Commit (success) or Abort (failure). Its
// errno refuses the mutation (journalhook.Hook.Record).
func journalRecord(h *journalhook.Hook, m *mutation, gs []guardedChild, session string) (*journalhook.Pending, syscall.Errno) {
	return h.Record(session, m.jop, journalNames(m, gs))
}

// journalNames are m's names for the hook, each with the parent
// directory the lock step holds (gs[i].at), or Dir -1 for the hook to open.
func journalNames(m *mutation, gs []guardedChild) []journalhook.Name {
	names := make([]journalhook.Name, len(m.names))
	for i, nm := range m.names {
		names[i] = journalhook.Name{Rel: nm.rel, Dir: -1, Doomed: nm.pin && m.jop != jExchange}
		if gs[i].inDir {
			names[i].Dir, names[i].Leaf = gs[i].at.FD, gs[i].leaf
		}
	}
	return names
}

// journalNote notes the state a successful change the journal does not
// record (jTimes) left m's names in, for session
// (journalhook.Hook.NoteState): mutate's journal step for such a change.
func journalNote(h *journalhook.Hook, m *mutation, gs []guardedChild, session string) {
	h.NoteState(session, journalNames(m, gs))
}

// journalMount is the mount as the journal's rooms see it
// (journalhook.Mount, rewind.Mount, and ascaller.Walker for the as-caller
// checks): the backing workspace, the mutation path for a rewind's steps
// (rewind_step.go), the kernel's caches. Safe for concurrent use.
type journalMount struct{ f *FS }

// OpenParent is prepareAt with its descriptor's release.
func (m journalMount) OpenParent(rel string) (int, string, func(), syscall.Errno) {
	d, leaf, errno := m.f.bk.prepareAt(rel)
	if errno != 0 {
		return -1, leaf, func() {}, errno
	}
	return d.FD, leaf, d.Close, 0
}

// NameOf is the workspace-relative name the kernel has now for the
// backing descriptor fd's file (backing.relOfFd); false for a file with
// no name (the link ends in " (deleted)") or outside the root.
func (m journalMount) NameOf(fd int) (string, bool) {
	rel, ok := m.f.bk.relOfFd(fd)
	if !ok || strings.HasSuffix(rel, " (deleted)") {
		return "", false
	}
	return rel, true
}

// NotOpen reports whether no handle through the mount is open on the
// backing file st: only then may the journal link a doomed file's inode
// into its store (journal.CaptureOptions), since a handle would see the
// file keep st_nlink 1 after its removal. O(open handles).
func (m journalMount) NotOpen(st *unix.Stat_t) bool {
	f := m.f
	ino := f.bk.stableAttr(&syscall.Stat_t{Dev: st.Dev, Ino: st.Ino}, 0).Ino
	h := &f.handles
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.files {
		if n.StableAttr().Ino == ino {
			return false
		}
	}
	return true
}
