package rewind

// The rewind's journal.Applier (docs/DESIGN.md#rewind-mount-restore):
// every step one Mount.Apply call, its backing work the journal's own
// per-name helpers.

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/journalhook"
	"github.com/rubinofs/rubinofs/journal"
)

// Applier is the journal.Applier of a rewind: every step one Mount.Apply
// call by the session's synthetic caller, without the guard's decision.
// Not safe for concurrent use (journal.Rewind applies steps in order).
type Applier struct {
	m       Mount
	by      By
	checks  *asChecks // the requester's (docs/DESIGN.md#as-caller); nil: none (the daemon's own)
	mu      sync.Mutex
	touched map[string]bool
	// forced are the conflicts' paths a forced rewind applies anyway
	// (Change.Forced); set before the first step.
	forced []string
}

// forcedAt reports whether a conflict applied anyway is at rel or below
// it (forced).
func (a *Applier) forcedAt(rel string) bool {
	for _, p := range a.forced {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			return true
		}
	}
	return false
}

// NewApplier is the Applier of steps run as by on m, with no requester's
// checks (the daemon's own rewind; Room.Rewind checks its requester).
func NewApplier(m Mount, by By) *Applier { return &Applier{m: m, by: by} }

// check is the requester's check of step s (nil without checks).
func (a *Applier) check(s journal.Step) error {
	if a.checks == nil {
		return nil
	}
	return a.checks.mayApplyStep(s)
}

// Touched lists the paths the steps changed (or tried to).
func (a *Applier) Touched() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.touched))
	for p := range a.touched {
		out = append(out, p)
	}
	return out
}

// apply runs ch as the session's change, without asking the guard.
func (a *Applier) apply(ch Change) error {
	a.mu.Lock()
	if a.touched == nil {
		a.touched = map[string]bool{}
	}
	a.touched[ch.Rel] = true
	if ch.To != "" {
		a.touched[ch.To] = true
	}
	a.mu.Unlock()
	if errno := a.m.Apply(a.by, ch); errno != 0 {
		return fmt.Errorf("%s %s: %w", ch.Op, ch.Rel, errno)
	}
	return nil
}

// inParent runs fn with rel's parent directory and leaf.
func (a *Applier) inParent(rel string, fn func(dirfd int, leaf string) error) syscall.Errno {
	fd, leaf, done, errno := a.m.OpenParent(rel)
	if errno != 0 {
		return errno
	}
	defer done()
	if err := fn(fd, leaf); err != nil {
		var en syscall.Errno
		if errors.As(err, &en) {
			return en
		}
		return syscall.EIO
	}
	return 0
}

// inParentRun is a Change.Run that runs fn in rel's parent directory
// (inParent), opened again: the lock step holds none for these steps.
func (a *Applier) inParentRun(rel string, fn func(dirfd int, leaf string) error) func([]int) syscall.Errno {
	return func([]int) syscall.Errno { return a.inParent(rel, fn) }
}

// own gives a new entry the owner and group of its pre-image when the
// daemon is root (docs/DESIGN.md#as-caller; the requester's, as a
// caller's own create would have, for a pre-image from before they were
// recorded), then, but for a symlink, its permission bits again (a chown
// clears setuid and setgid).
func (a *Applier) own(dirfd int, leaf string, pre journal.PreImage) error {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid := a.by.Uid, a.by.Gid
	if pre.Uid != nil && pre.Gid != nil {
		uid, gid = *pre.Uid, *pre.Gid
	}
	unix.Fchownat(dirfd, leaf, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW)
	if pre.Kind == journal.KindSymlink {
		return nil
	}
	return unix.Fchmodat(dirfd, leaf, pre.Mode&07777, 0)
}

// Restore makes rel what pre says (journal.Applier). A directory's mode
// and a new entry are journal.RestoreAt's and journal.CreateAt's work,
// each inside one Mount.Apply call; a name in the way is removed first by
// its own call, so the journal records the removal and the creation
// apart, as a caller's own would be.
func (a *Applier) Restore(rel string, pre journal.PreImage, blobs *journal.Blobs) error {
	if err := a.check(journal.Step{Kind: journal.StepRestore, Path: rel, Pre: pre}); err != nil {
		return err
	}
	cur, err := lstat(a.m, rel)
	if err != nil {
		return err
	}
	switch pre.Kind {
	case journal.KindAbsent:
		return a.remove(rel, cur)
	case journal.KindDir:
		if cur.Kind == journal.KindDir {
			if cur.Mode&07777 == pre.Mode&07777 {
				return nil
			}
			return a.apply(Change{Op: journalhook.OpChmod, Rel: rel, Run: a.inParentRun(rel, func(fd int, leaf string) error {
				return journal.RestoreAt(fd, leaf, pre, blobs)
			})})
		}
		if err := a.remove(rel, cur); err != nil {
			return err
		}
		return a.create(rel, journalhook.OpMkdir, pre, blobs)
	case journal.KindSymlink:
		if err := a.remove(rel, cur); err != nil {
			return err
		}
		return a.create(rel, journalhook.OpSymlink, pre, blobs)
	case journal.KindFile:
		return a.restoreFile(rel, pre, cur, blobs)
	}
	return fmt.Errorf("%s: unknown pre-image kind %q", rel, pre.Kind)
}

// create makes the missing rel what pre says
// (docs/DESIGN.md#rewind-mount-restore) (journal.RestoreAt for a
// directory, journal.CreateAt for the rest: made under its own name, not
// a temporary one renamed over it, which the watcher would see as a
// change nobody bracketed), owned by the requester (own), as one
// Mount.Apply call journaled as op.
func (a *Applier) create(rel string, op string, pre journal.PreImage, blobs *journal.Blobs) error {
	return a.apply(Change{Op: op, Rel: rel, Run: a.inParentRun(rel, func(fd int, leaf string) error {
		var err error
		if pre.Kind == journal.KindDir {
			err = journal.RestoreAt(fd, leaf, pre, blobs)
		} else {
			err = journal.CreateAt(fd, leaf, pre, blobs)
		}
		if err != nil {
			return err
		}
		return a.own(fd, leaf, pre)
	})})
}

// restoreFile gives rel pre's bytes and mode: in place when it is a
// regular file now and pre is one (a write, guarded notes and credit as a
// truncate by path: the inode stays, so its hard links and open handles
// see the restored bytes, where journal.RestoreAt's rename of a new file
// would leave them on the rewound-away bytes), else created anew
// (create). A FIFO, device or socket is never opened: a FIFO's open for
// writing waits for a reader, and the rewind with it (the restore's bytes
// went into the pipe, the FIFO stayed). The in-place open is non-blocking
// and checked to be of a regular file too, in case the name changed
// since the lstat: otherwise the step fails with EAGAIN (try again).
func (a *Applier) restoreFile(rel string, pre journal.PreImage, cur journal.After, blobs *journal.Blobs) error {
	if pre.Unrecoverable != "" || (pre.Blob == "" && pre.Size > 0) {
		return fmt.Errorf("%s: its state at the checkpoint is unrecoverable (%s)", rel, pre.Unrecoverable)
	}
	if inPlace(cur, pre) {
		return a.apply(Change{Op: journalhook.OpWrite, Rel: rel, Run: a.inParentRun(rel, func(dirfd int, leaf string) error {
			fd, err := unix.Openat(dirfd, leaf, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return err
			}
			if !regular(st.Mode) {
				return unix.EAGAIN
			}
			if err := unix.Ftruncate(fd, 0); err != nil {
				return err
			}
			if err := journal.FillFd(fd, pre, blobs); err != nil {
				return err
			}
			return ownFd(fd, pre)
		})})
	}
	if err := a.remove(rel, cur); err != nil {
		return err
	}
	return a.create(rel, journalhook.OpCreate, pre, blobs)
}

// inPlace reports whether a restore of pre over the name's current state
// cur writes the file in place (restoreFile): both are regular files.
// mayApplyStep checks the requester's right by the same rule, so the check
// and the change agree on what is written (the file, or the directory's
// entry).
func inPlace(cur journal.After, pre journal.PreImage) bool {
	return cur.Kind == journal.KindFile && pre.Kind == journal.KindFile && regular(cur.Mode) && regular(pre.Mode)
}

// regular reports whether mode (st_mode, type bits included) is a
// regular file's; a mode without type bits (a pre-image written before
// they were kept) counts as one.
func regular(mode uint32) bool {
	return mode&unix.S_IFMT == unix.S_IFREG || mode&unix.S_IFMT == 0
}

// remove removes rel as cur describes it: an empty directory, or any
// other name (an unlink, guarded notes as the session's own); nothing
// when it is absent.
func (a *Applier) remove(rel string, cur journal.After) error {
	switch cur.Kind {
	case journal.KindAbsent:
		return nil
	case journal.KindDir:
		return a.apply(Change{Op: journalhook.OpRmdir, Rel: rel, Run: a.inParentRun(rel, func(fd int, leaf string) error {
			return unix.Unlinkat(fd, leaf, unix.AT_REMOVEDIR)
		})})
	}
	return a.apply(Change{Op: journalhook.OpUnlink, Rel: rel, Run: func(at []int) syscall.Errno {
		if at[0] >= 0 {
			return errnoOf(unix.Unlinkat(at[0], path.Base(rel), 0))
		}
		return a.inParent(rel, func(fd int, leaf string) error { return unix.Unlinkat(fd, leaf, 0) })
	}})
}

// Rename renames from to to, replacing to (journal.Applier).
func (a *Applier) Rename(from, to string) error {
	if err := a.check(journal.Step{Kind: journal.StepRename, Path: to, From: from}); err != nil {
		return err
	}
	return a.rename(from, to, 0)
}

// Exchange swaps x and y (journal.Applier).
func (a *Applier) Exchange(x, y string) error {
	if err := a.check(journal.Step{Kind: journal.StepExchange, Path: x, From: y}); err != nil {
		return err
	}
	return a.rename(x, y, unix.RENAME_EXCHANGE)
}

// rename is renameat2 of from to to with flags, as a rename's mutation
// without its asks. A plain rename is not journal.RenameReplacingAt (which
// journal.DirApplier uses): undone in reverse order, a rename's source
// name is missing again when its undo runs, so nothing of another kind is
// in the way, and a rename that replaced a directory the planner did not
// expect there fails (EISDIR, ENOTDIR) rather than removing it.
func (a *Applier) rename(from, to string, flags uint) error {
	op := journalhook.OpRename
	if flags&unix.RENAME_EXCHANGE != 0 {
		op = journalhook.OpExchange
	}
	return a.apply(Change{Op: op, Rel: from, To: to, Forced: a.forcedAt(from) || a.forcedAt(to), Run: func([]int) syscall.Errno {
		fd1, l1, done1, e1 := a.m.OpenParent(from)
		if e1 != 0 {
			return e1
		}
		defer done1()
		fd2, l2, done2, e2 := a.m.OpenParent(to)
		if e2 != 0 {
			return e2
		}
		defer done2()
		return errnoOf(unix.Renameat2(fd1, l1, fd2, l2, flags))
	}})
}

// errnoOf is err as an errno (0 for nil, EIO for one that is none).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}

// ownFd gives the open regular file fd the owner and group of pre when
// they were recorded, differ from its own and the daemon is root, then
// pre's permission bits again (a chown clears setuid and setgid):
// docs/DESIGN.md#as-caller.
func ownFd(fd int, pre journal.PreImage) error {
	var st unix.Stat_t
	if os.Geteuid() != 0 || pre.Uid == nil || pre.Gid == nil || unix.Fstat(fd, &st) != nil ||
		(st.Uid == *pre.Uid && st.Gid == *pre.Gid) {
		return nil
	}
	if err := unix.Fchown(fd, int(*pre.Uid), int(*pre.Gid)); err != nil {
		return err
	}
	return unix.Fchmod(fd, pre.Mode&07777)
}
