package fusefs

// A rewind's side in the mount (docs/DESIGN.md#journal-hook): the
// Inspector the journal plans against, and the Applier whose every step
// is one FS.mutate call as the session's own change, then the kernel's
// caches of the touched paths invalidated from a goroutine.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/journal"
)

// fsInspector is the journal.Inspector of the backing workspace.
type fsInspector struct{ f *FS }

// Lstat is path's state, without following a final symlink (KindAbsent
// for a missing path or one under a missing directory). It is afterOf,
// not journal.LstatAt: the state must compare equal to the After the
// mount journaled, which for a directory has no size or mtime (LstatAt
// keeps both), and a path through a symlink is prepareAt's error (ELOOP),
// not absent as for journal.DirInspector.
func (i fsInspector) Lstat(p string) (journal.After, error) {
	var st syscall.Stat_t
	switch errno := i.f.lstatRel(p, &st); errno {
	case 0:
		return afterOf(p, &st), nil
	case syscall.ENOENT, syscall.ENOTDIR:
		return journal.After{Path: p, Kind: journal.KindAbsent}, nil
	default:
		return journal.After{}, errno
	}
}

// HashOf is the xxh3-128 of path's bytes (32 hex digits), through the
// guard's hash cache.
func (i fsInspector) HashOf(p string) (string, error) {
	t, err := i.f.LookupTarget(p)
	if err != nil {
		return "", err
	}
	if t.Stat.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	h, err := i.f.cfg.Guard.Hashes().Sum(t.Stat, t.Open)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// currentBytes reads path's current bytes, for Diff (at most the
// journal's blob limit plus one byte: a larger file is binary to a diff).
func currentBytes(f *FS, p string) ([]byte, error) {
	fl, err := f.openForHashAt(p)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	return io.ReadAll(io.LimitReader(fl, 1<<30))
}

// Rewind plans the rewind of session to checkpoint to and, unless dryRun,
// applies it (journal.Rewind) as the session's own changes: each step is
// one FS.mutate call that skips the guard's decision (the conflict rule
// replaced it) but keeps the journal record, the watcher bracket, the
// guard's notes and the credit. The requester c may make only the steps
// it could make itself (docs/DESIGN.md#as-caller): the whole plan is
// checked first (a refusal changes nothing and is the error: EACCES with
// the reason, also for a dry run), then each step again as it is applied
// (a refused step is one of the Result's Errors). An entry made anew gets
// the owner and group of its pre-image (the requester's for a pre-image
// from before they were recorded) when the daemon is root. The kernel's caches of the touched paths are
// invalidated from a goroutine; Rewind returns once that is done (it runs
// inside a control-file request, which a notification must not be sent
// from, but may wait for). Errors: the journal's.
func (h CtlHost) Rewind(session, to string, opt journal.RewindOptions, dryRun bool, c ctltree.Caller) (journal.Plan, journal.Result, error) {
	f := h.f
	j := f.cfg.Journal
	if j == nil {
		return journal.Plan{}, journal.Result{}, errors.New("the journal is off")
	}
	plan, err := j.PlanRewind(session, to, fsInspector{f}, opt)
	if err != nil {
		return plan, journal.Result{}, err
	}
	checks := &asChecks{f: f, cr: credsOf(c)}
	defer checks.close()
	if err := checks.mayApplyPlan(plan); err != nil || dryRun {
		return plan, journal.Result{}, err
	}
	a := &rewindApplier{f: f, by: caller{session: session, uid: c.Uid, gid: c.Gid}, checks: checks}
	res, err := j.Rewind(plan, a)
	f.journalCheckpointed() // its automatic checkpoint
	<-f.invalidateKernel(a.touchedPaths())
	return plan, res, err
}

// invalidateKernel drops the kernel's caches of rels (each name's dentry,
// its inode's data and attributes, its parent's attributes and listing)
// from a goroutine, never from the calling request handler, and returns a
// channel closed once the notifications were sent.
func (f *FS) invalidateKernel(rels []string) <-chan struct{} {
	done := make(chan struct{})
	if f.server.Load() == nil || len(rels) == 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		for _, rel := range rels {
			dir, name := path.Split(rel)
			parent, ok := f.lookupInode(strings.TrimSuffix(dir, "/"))
			if !ok {
				continue // the kernel knows nothing below it
			}
			if child := parent.GetChild(name); child != nil {
				child.NotifyContent(0, 0)
				var st syscall.Stat_t
				if f.lstatRel(rel, &st) != 0 {
					parent.RmChild(name)
				}
			}
			parent.NotifyEntry(name)
			parent.NotifyContent(0, 0)
		}
	}()
	return done
}

// rewindApplier is the journal.Applier of a rewind: every step one
// FS.mutate call by the session's synthetic caller, without the guard's
// decision (mutation.noAsk). Not safe for concurrent use (journal.Rewind
// applies steps in order).
type rewindApplier struct {
	f       *FS
	by      caller
	checks  *asChecks // the requester's (docs/DESIGN.md#as-caller); nil: none (the daemon's own)
	mu      sync.Mutex
	touched map[string]bool
}

// check is the requester's check of step s (nil without checks).
func (a *rewindApplier) check(s journal.Step) error {
	if a.checks == nil {
		return nil
	}
	return a.checks.mayApplyStep(s)
}

// touchedPaths lists the paths the steps changed.
func (a *rewindApplier) touchedPaths() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.touched))
	for p := range a.touched {
		out = append(out, p)
	}
	return out
}

// mutate runs m as the session's change, without asking the guard.
func (a *rewindApplier) mutate(m mutation) error {
	by := a.by
	m.by = &by
	if m.kind == guarded {
		m.kind = rewind // the conflict rule decided: never asked
	}
	a.mu.Lock()
	if a.touched == nil {
		a.touched = map[string]bool{}
	}
	for _, nm := range m.names {
		a.touched[nm.rel] = true
	}
	a.mu.Unlock()
	if errno := a.f.mutate(context.Background(), m); errno != 0 {
		return fmt.Errorf("%s %s: %w", m.jop, m.names[0].rel, errno)
	}
	return nil
}

// inParent runs fn with rel's parent directory and leaf.
func (a *rewindApplier) inParent(rel string, fn func(d dirFd, leaf string) error) syscall.Errno {
	d, leaf, errno := a.f.prepareAt(rel)
	if errno != 0 {
		return errno
	}
	defer d.close()
	if err := fn(d, leaf); err != nil {
		var en syscall.Errno
		if errors.As(err, &en) {
			return en
		}
		return syscall.EIO
	}
	return 0
}

// own gives a new entry the owner and group of its pre-image when the
// daemon is root (docs/DESIGN.md#as-caller; the requester's, as a
// caller's own create would have, for a pre-image from before they were
// recorded), then, but for a symlink, its permission bits again (a chown
// clears setuid and setgid).
func (a *rewindApplier) own(d dirFd, leaf string, pre journal.PreImage) error {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid := a.by.uid, a.by.gid
	if pre.Uid != nil && pre.Gid != nil {
		uid, gid = *pre.Uid, *pre.Gid
	}
	unix.Fchownat(d.fd, leaf, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW)
	if pre.Kind == journal.KindSymlink {
		return nil
	}
	return unix.Fchmodat(d.fd, leaf, pre.Mode&07777, 0)
}

// current is rel's kind now (KindAbsent when missing).
func (a *rewindApplier) current(rel string) (journal.After, error) {
	return fsInspector{a.f}.Lstat(rel)
}

// Restore makes rel what pre says (journal.Applier). A directory's mode
// and a new entry are journal.RestoreAt's and journal.CreateAt's work,
// each inside one FS.mutate call; a name in the way is removed first by
// its own call, so the journal records the removal and the creation
// apart, as a caller's own would be.
func (a *rewindApplier) Restore(rel string, pre journal.PreImage, blobs *journal.Blobs) error {
	if err := a.check(journal.Step{Kind: journal.StepRestore, Path: rel, Pre: pre}); err != nil {
		return err
	}
	cur, err := a.current(rel)
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
			return a.mutate(mutation{kind: fresh, subject: subject{names: []mutName{{rel: rel}}}, jop: jChmod, run: func([]dirFd) syscall.Errno {
				return a.inParent(rel, func(d dirFd, leaf string) error { return journal.RestoreAt(d.fd, leaf, pre, blobs) })
			}})
		}
		if err := a.remove(rel, cur); err != nil {
			return err
		}
		return a.create(rel, jMkdir, pre, blobs)
	case journal.KindSymlink:
		if err := a.remove(rel, cur); err != nil {
			return err
		}
		return a.create(rel, jSymlink, pre, blobs)
	case journal.KindFile:
		return a.restoreFile(rel, pre, cur, blobs)
	}
	return fmt.Errorf("%s: unknown pre-image kind %q", rel, pre.Kind)
}

// create makes the missing rel what pre says (docs/DESIGN.md#rewind-mount-restore) (journal.RestoreAt for a
// directory, journal.CreateAt for the rest: made under its own name, not
// a temporary one renamed over it, which the watcher would see as a
// change nobody bracketed), owned by the requester (own), as one
// FS.mutate call journaled as op.
func (a *rewindApplier) create(rel string, op string, pre journal.PreImage, blobs *journal.Blobs) error {
	return a.mutate(mutation{kind: fresh, subject: subject{names: []mutName{{rel: rel}}}, jop: op, run: func([]dirFd) syscall.Errno {
		return a.inParent(rel, func(d dirFd, leaf string) error {
			var err error
			if pre.Kind == journal.KindDir {
				err = journal.RestoreAt(d.fd, leaf, pre, blobs)
			} else {
				err = journal.CreateAt(d.fd, leaf, pre, blobs)
			}
			if err != nil {
				return err
			}
			return a.own(d, leaf, pre)
		})
	}})
}

// restoreFile gives rel pre's bytes and mode: in place when it is a
// regular file now (a write, guarded notes and credit as a truncate by
// path: the inode stays, so its hard links and open handles see the
// restored bytes, where journal.RestoreAt's rename of a new file would
// leave them on the rewound-away bytes), else created anew (create).
func (a *rewindApplier) restoreFile(rel string, pre journal.PreImage, cur journal.After, blobs *journal.Blobs) error {
	if pre.Unrecoverable != "" || (pre.Blob == "" && pre.Size > 0) {
		return fmt.Errorf("%s: its state at the checkpoint is unrecoverable (%s)", rel, pre.Unrecoverable)
	}
	if cur.Kind == journal.KindFile {
		return a.mutate(mutation{subject: subject{names: []mutName{{rel: rel, change: truncated}}}, jop: jWrite,
			run: func([]dirFd) syscall.Errno {
				return a.inParent(rel, func(d dirFd, leaf string) error {
					fd, err := unix.Openat(d.fd, leaf, unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
					if err != nil {
						return err
					}
					defer unix.Close(fd)
					if err := journal.FillFd(fd, pre, blobs); err != nil {
						return err
					}
					return ownFd(fd, pre)
				})
			}})
	}
	if err := a.remove(rel, cur); err != nil {
		return err
	}
	return a.create(rel, jCreate, pre, blobs)
}

// remove removes rel as cur describes it: an empty directory, or any
// other name (an unlink, guarded notes as the session's own); nothing
// when it is absent.
func (a *rewindApplier) remove(rel string, cur journal.After) error {
	switch cur.Kind {
	case journal.KindAbsent:
		return nil
	case journal.KindDir:
		return a.mutate(mutation{kind: fresh, subject: subject{names: []mutName{{rel: rel}}}, jop: jRmdir, run: func([]dirFd) syscall.Errno {
			return a.inParent(rel, func(d dirFd, leaf string) error { return unix.Unlinkat(d.fd, leaf, unix.AT_REMOVEDIR) })
		}})
	}
	return a.mutate(mutation{subject: subject{names: []mutName{{rel: rel, change: unlinked, pin: true}}}, jop: jUnlink,
		run: func(at []dirFd) syscall.Errno {
			if at[0].fd >= 0 {
				return fs.ToErrno(unix.Unlinkat(at[0].fd, path.Base(rel), 0))
			}
			return a.inParent(rel, func(d dirFd, leaf string) error { return unix.Unlinkat(d.fd, leaf, 0) })
		}})
}

// Rename renames from to to, replacing to (journal.Applier).
func (a *rewindApplier) Rename(from, to string) error {
	if err := a.check(journal.Step{Kind: journal.StepRename, Path: to, From: from}); err != nil {
		return err
	}
	return a.rename(from, to, 0)
}

// Exchange swaps a and b (journal.Applier).
func (a *rewindApplier) Exchange(x, y string) error {
	if err := a.check(journal.Step{Kind: journal.StepExchange, Path: x, From: y}); err != nil {
		return err
	}
	return a.rename(x, y, unix.RENAME_EXCHANGE)
}

// rename is renameat2 of from to to with flags, as Node.Rename's mutation
// without its asks. A plain rename is not journal.RenameReplacingAt (which
// journal.DirApplier uses): undone in reverse order, a rename's source
// name is missing again when its undo runs, so nothing of another kind is
// in the way, and a rename that replaced a directory the planner did not
// expect there fails (EISDIR, ENOTDIR) rather than removing it.
func (a *rewindApplier) rename(from, to string, flags uint) error {
	m := mutation{
		subject: subject{names: []mutName{{rel: from, change: unchanged, to: to}, {rel: to, change: replaced, pin: true}}},
		jop:     jRename,
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		m.jop = jExchange
		m.names[0].change = rewritten
		m.names[1].change, m.names[1].to = rewritten, from
	}
	m.run = func([]dirFd) syscall.Errno {
		d1, l1, e1 := a.f.prepareAt(from)
		if e1 != 0 {
			return e1
		}
		defer d1.close()
		d2, l2, e2 := a.f.prepareAt(to)
		if e2 != 0 {
			return e2
		}
		defer d2.close()
		return fs.ToErrno(unix.Renameat2(d1.fd, l1, d2.fd, l2, flags))
	}
	return a.mutate(m)
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
