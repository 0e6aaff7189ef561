package rewind

// Who may see and change what through the journal's requests
// (docs/DESIGN.md#as-caller): a requester sees a file's bytes (diff) or
// hash (changes) only where it could read them itself, and a rewind
// writes no file and no directory entry the requester could not write
// itself. Every check is internal/ascaller's, the kernel's own as the
// requester.

import (
	"errors"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/ascaller"
	"github.com/rubinofs/rubinofs/journal"
)

// asChecks are the as-caller checks of one request for requester cr,
// sharing one ascaller.Thread, started at the first check and ended by
// close. Not safe for concurrent use.
type asChecks struct {
	r  *Room
	cr ascaller.Creds
	t  *ascaller.Thread
}

// access is ascaller.Access on the request's thread.
func (a *asChecks) access(rel string, mode uint32) error {
	if a.t == nil {
		a.t = ascaller.NewThread(a.cr)
	}
	return a.t.Do(func() error { return ascaller.Here(a.r.m, rel, mode) })
}

// close ends the request's thread, if it started one.
func (a *asChecks) close() {
	if a.t != nil {
		a.t.Close()
	}
}

// gateInspector is the workspace's inspector with journal.ContentGate for
// a requester: Diff shows a side's bytes only where it may read them.
type gateInspector struct {
	inspector
	*asChecks
}

// MayShow reports whether cr may see path's bytes: now (pre nil) when it
// may open path for reading itself; as pre says when mayReadPre. Root
// may always.
func (g gateInspector) MayShow(p string, pre *journal.PreImage) bool {
	if g.cr.Uid == 0 {
		return true
	}
	if pre == nil {
		return g.access(p, unix.R_OK) == nil
	}
	return mayReadPre(g.access, g.cr, p, *pre)
}

// mayReadPre reports whether cr may see the bytes of pre, path's state at
// a checkpoint, with access an ascaller.Access for cr: root may; otherwise
// the pre-image's own owner, group and mode must grant cr reading (mode
// bits: the file's ACL at the time is not kept), and cr must be able to
// search the directory that holds path now (its nearest existing
// ancestor). A pre-image from before owners were recorded is shown only
// when cr may read path as it is now.
func mayReadPre(access func(rel string, mode uint32) error, cr ascaller.Creds, p string, pre journal.PreImage) bool {
	if cr.Uid == 0 {
		return true
	}
	if pre.Uid == nil || pre.Gid == nil {
		return access(p, unix.R_OK) == nil
	}
	if !ascaller.ModeGrants(cr, *pre.Uid, *pre.Gid, pre.Mode, 4) {
		return false
	}
	for dir := path.Dir(p); ; dir = path.Dir(dir) {
		if dir == "." || dir == "/" {
			dir = ""
		}
		err := access(dir, unix.X_OK)
		if !errors.Is(err, syscall.ENOENT) || dir == "" {
			return err == nil
		}
	}
}

// redactChanges blanks the hashes in list that cr may not see: the
// current one (After.Hash) unless cr may read the path now, the one of the
// state at the checkpoint (Before.Hash) too (a change list does not carry
// the pre-image's owner; docs/DESIGN.md#as-caller). Root sees all.
func (r *Room) redactChanges(cr ascaller.Creds, list []journal.PathChange) {
	if cr.Uid == 0 {
		return
	}
	rels := make([]string, len(list))
	for i, pc := range list {
		rels[i] = pc.Path
	}
	ascaller.AccessAll(r.m, cr, rels, unix.R_OK, func(i int, err error) {
		if err != nil {
			list[i].After.Hash, list[i].Before.Hash = "", ""
		}
	})
}

// mayWriteEntry checks that the requester (a.cr) could create or remove
// the name rel itself: write and search permission on its directory (as
// cr), and the sticky bit's rule (the name's or the directory's owner, or
// root). Errors: *ctltree.Error, EACCES with the reason (ENOENT when the
// directory is missing).
func (a *asChecks) mayWriteEntry(rel string) error {
	m, cr := a.r.m, a.cr
	dir := path.Dir(rel)
	if dir == "." {
		dir = ""
	}
	if err := a.access(dir, unix.W_OK|unix.X_OK); err != nil {
		return ascaller.DenyReason(cr, "write the directory entry", rel, err)
	}
	if cr.Uid == 0 {
		return nil
	}
	var dst, st syscall.Stat_t
	if m.Lstat(dir, &dst) != 0 || dst.Mode&syscall.S_ISVTX == 0 || m.Lstat(rel, &st) != 0 {
		return nil
	}
	if st.Uid != cr.Uid && dst.Uid != cr.Uid {
		return ascaller.DenyReason(cr, "remove or replace", rel, errors.New("its directory is sticky and neither is the requester's"))
	}
	return nil
}

// mayRewrite checks that the requester could write the existing file rel
// itself (as cr, write permission) and, when mode (permission bits)
// differs from its own, change its mode (its owner, or root). Errors as
// mayWriteEntry's.
func (a *asChecks) mayRewrite(rel string, mode uint32, chmod bool) error {
	m, cr := a.r.m, a.cr
	if !chmod {
		if err := a.access(rel, unix.W_OK); err != nil {
			return ascaller.DenyReason(cr, "write", rel, err)
		}
	}
	var st syscall.Stat_t
	if errno := m.Lstat(rel, &st); errno != 0 {
		return ascaller.DenyReason(cr, "write", rel, errno)
	}
	if st.Mode&07777 != mode&07777 && cr.Uid != 0 && st.Uid != cr.Uid {
		return ascaller.DenyReason(cr, "change the mode of", rel, errors.New("it is not the requester's"))
	}
	return nil
}

// mayApplyStep checks that the requester could make step s itself,
// against the workspace as it is now: a rename or exchange writes both
// names' entries; a removal writes the entry; a restore over a regular
// file rewrites it (mayRewrite), over a directory changes its mode, and
// otherwise writes the entry. Root is not checked (it passes them all).
// Errors: *ctltree.Error (EACCES; ENOENT when a directory on the way is
// missing, which an earlier step of the rewind may create).
func (a *asChecks) mayApplyStep(s journal.Step) error {
	cr := a.cr
	if cr.Uid == 0 {
		return nil // root passes every permission check these make
	}
	switch s.Kind {
	case journal.StepRename, journal.StepExchange:
		if err := a.mayWriteEntry(s.From); err != nil {
			return err
		}
		return a.mayWriteEntry(s.Path)
	}
	cur, err := lstat(a.r.m, s.Path)
	if err != nil {
		return ascaller.DenyReason(cr, "write", s.Path, err)
	}
	switch {
	case s.Kind == journal.StepRemove || s.Pre.Kind == journal.KindAbsent:
		if cur.Kind == journal.KindAbsent {
			return nil
		}
	case inPlace(cur, s.Pre): // the file itself is written (restoreFile)
		return a.mayRewrite(s.Path, s.Pre.Mode, false)
	case cur.Kind == journal.KindDir && s.Pre.Kind == journal.KindDir:
		return a.mayRewrite(s.Path, s.Pre.Mode, true)
	}
	return a.mayWriteEntry(s.Path)
}

// mayApplyPlan checks every step of plan with mayApplyStep before any is
// applied, so a rewind the requester may not make changes nothing: the
// first refusal is the error (EACCES with its reason). A step that fails
// its check otherwise (a directory missing now, which an earlier step may
// create; a symlink on the way) is left to the check at its application.
func (a *asChecks) mayApplyPlan(plan journal.Plan) error {
	for _, s := range plan.Steps {
		err := a.mayApplyStep(s)
		var ce *ctltree.Error
		if err != nil && errors.As(err, &ce) && ce.Errno == syscall.EACCES {
			return ctltree.Errorf(syscall.EACCES, "%s; nothing was rewound: name only paths you may write (rewind --to CP PATH...), or ask their owner or root", ce.Msg)
		}
	}
	return nil
}
