// Package ascaller makes access checks as the caller
// (docs/DESIGN.md#as-caller). The daemon runs
// as root, so a control-file request that reads or writes workspace files
// on a caller's behalf (a journal diff, a rewind, a read declaration) must
// first ask whether the caller could have done that access itself. The
// check is the kernel's own: on a goroutine locked to its OS thread the
// thread takes the caller's fs uid, fs gid and supplementary groups
// (setgroups, setfsgid, setfsuid as raw per-thread system calls, as
// gocryptfs does for allow_other), makes the access (openat, faccessat2
// with AT_EACCESS) below the workspace root descriptor, and takes the
// daemon's credentials back. Mode bits, POSIX ACLs, the search permission
// of every directory on the way and the capabilities root keeps are all
// honoured, because the kernel decides.
//
// The walk from the workspace root is the mount's (Walker); this package
// switches the credentials and asks the kernel. It never imports the FUSE
// adapter.
package ascaller

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/procfs"
)

// Creds are the credentials an access is checked with: fs uid, fs gid and
// the supplementary groups.
type Creds struct {
	Uid, Gid uint32
	Groups   []uint32
}

// Of returns the credentials of caller c: its fs uid and gid as the
// kernel reported them and its supplementary groups from
// /proc/PID/status, read within procfs.Bound (docs/DESIGN.md#no-wait-on-caller).
// When the groups cannot be had (no pid, a slow or vanished process, a
// status whose fs ids are not c's, so a reused pid) the credentials have no
// supplementary groups: the check may then refuse what the caller could do
// through a group, never allow more.
func Of(c ctltree.Caller) Creds {
	cr := Creds{Uid: c.Uid, Gid: c.Gid}
	if c.Pid == 0 || c.Uid == 0 { // root's checks do not depend on its groups
		return cr
	}
	b, err := procfs.ReadFile("/proc/" + strconv.FormatUint(uint64(c.Pid), 10) + "/status")
	if err != nil {
		return cr
	}
	var groups []uint32
	idsOK := 0
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		key, val, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid", "Gid": // real, effective, saved, fs
			want := c.Uid
			if key == "Gid" {
				want = c.Gid
			}
			if len(f) == 4 && f[3] == strconv.FormatUint(uint64(want), 10) {
				idsOK++
			}
		case "Groups":
			for _, g := range f {
				n, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return cr
				}
				groups = append(groups, uint32(n))
			}
		}
	}
	if idsOK == 2 {
		cr.Groups = groups
	}
	return cr
}

// ErrNotAsCaller is Run's error when the thread could not take the
// caller's credentials (a daemon that is not root checking another uid).
var ErrNotAsCaller = errors.New("the daemon cannot take the caller's credentials (it is not root)")

// Run runs fn on an OS thread whose fs uid, fs gid and supplementary
// groups are cr's, and returns fn's error (Thread, for one call).
// Safe for concurrent use: each call has its own goroutine and thread.
func Run(cr Creds, fn func() error) error {
	t := NewThread(cr)
	defer t.Close()
	return t.Do(fn)
}

// Thread is an OS thread that holds a caller's credentials and runs
// the functions handed to Do, one at a time, until Close: a request that
// makes many checks (a diff's paths) pays the credential switch once. fn
// must make its system calls itself, on the calling goroutine (one it
// starts runs with the daemon's credentials). The thread takes the
// daemon's credentials back at Close before it is unlocked; a thread that
// could not be restored stays locked to its goroutine, which then ends, so
// the Go runtime ends the thread. A daemon that is not root runs fn with
// its own credentials when they are cr's uid and gid, else every Do
// returns ErrNotAsCaller. Do and Close may be called from any goroutine
// but not concurrently with each other; Close must be called (else the
// thread stays locked).
type Thread struct {
	work   chan func()
	err    error // why the thread could not take the credentials
	closed bool
}

// NewThread starts a Thread with cr's credentials.
func NewThread(cr Creds) *Thread {
	t := &Thread{}
	if os.Geteuid() != 0 {
		if cr.Uid != uint32(os.Geteuid()) || cr.Gid != uint32(os.Getegid()) {
			t.err = ErrNotAsCaller
		}
		return t
	}
	t.work = make(chan func())
	ready := make(chan error, 1)
	go t.run(cr, ready)
	if t.err = <-ready; t.err != nil {
		t.work = nil
	}
	return t
}

// run is the thread's goroutine: it takes cr, reports on ready, serves
// work until it is closed, then takes the daemon's credentials back.
func (t *Thread) run(cr Creds, ready chan<- error) {
	runtime.LockOSThread()
	restored := false
	defer func() {
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	saved, err := unix.Getgroups()
	if err != nil {
		restored = true // nothing was changed yet
		ready <- err
		return
	}
	if err := setThreadCreds(cr.Uid, cr.Gid, cr.Groups); err != nil {
		restored = setThreadCreds(0, 0, toU32(saved)) == nil
		ready <- err
		return
	}
	ready <- nil
	for fn := range t.work {
		fn()
	}
	restored = setThreadCreds(0, 0, toU32(saved)) == nil
}

// Do runs fn on the thread and returns its error (the thread's own error
// when it could not take the credentials).
func (t *Thread) Do(fn func() error) error {
	if t.err != nil {
		return t.err
	}
	if t.work == nil { // a daemon that is not root, acting as itself
		return fn()
	}
	var err error
	done := make(chan struct{})
	t.work <- func() { err = fn(); close(done) }
	<-done
	return err
}

// Close ends the thread's service; idempotent.
func (t *Thread) Close() {
	if !t.closed && t.work != nil {
		close(t.work)
	}
	t.closed = true
}

// toU32 converts getgroups' ints.
func toU32(gs []int) []uint32 {
	out := make([]uint32, len(gs))
	for i, g := range gs {
		out[i] = uint32(g)
	}
	return out
}

// setThreadCreds sets this thread's supplementary groups, fs gid and fs uid
// (in that order) with raw system calls, which act on the calling thread
// only (Go's syscall.Setgroups would change every thread), and checks
// that the fs ids took (setfsuid reports no error).
func setThreadCreds(uid, gid uint32, groups []uint32) error {
	gs := make([]uint32, len(groups)+1) // never empty, so &gs[0] exists
	copy(gs, groups)
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&gs[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
	if cur, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); uint32(cur) != gid {
		return fmt.Errorf("setfsgid(%d) did not take", gid)
	}
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
	if cur, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); uint32(cur) != uid {
		return fmt.Errorf("setfsuid(%d) did not take", uid)
	}
	return nil
}

// Walker is the mount's walk below its workspace root descriptor:
// OpenParent opens the parent directory of the workspace-relative path rel
// ("" is the workspace root, whose leaf is ".") without following a
// symlink on the way, and returns its descriptor, rel's last element in
// it, and what releases the descriptor. Package fusefs implements it. The
// walk is made on the calling goroutine's thread, so with a Thread's
// credentials the search permission of every directory on the way is
// checked as the caller.
type Walker interface {
	OpenParent(rel string) (dirfd int, leaf string, done func(), errno syscall.Errno)
}

// Access checks, as cr, access mode (unix.R_OK, W_OK, X_OK, or'ed; 0
// only looks the path up) to the workspace-relative path rel ("" is the
// workspace root) without following a final symlink: the walk from the
// workspace root descriptor (w) is made as cr, so the search
// permission of every directory on the way is checked too, and the leaf
// with faccessat2(AT_EACCESS|AT_SYMLINK_NOFOLLOW), the permission check
// open(2) and the *at calls make. Errors: the kernel's errno (EACCES,
// EPERM, ENOENT, ELOOP, ...), or ErrNotAsCaller.
func Access(w Walker, cr Creds, rel string, mode uint32) error {
	var err error
	AccessAll(w, cr, []string{rel}, mode, func(_ int, e error) { err = e })
	return err
}

// AccessAll is Access for each of rels in one thread switch, calling
// res with each index and its result, in order, from the thread that has
// cr's credentials (res must not block on other goroutines).
func AccessAll(w Walker, cr Creds, rels []string, mode uint32, res func(i int, err error)) {
	err := Run(cr, func() error {
		for i, rel := range rels {
			res(i, Here(w, rel, mode))
		}
		return nil
	})
	if err != nil {
		for i := range rels {
			res(i, err)
		}
	}
}

// Here is one Access check with the calling thread's current
// credentials (inside Thread.Do or Run).
func Here(w Walker, rel string, mode uint32) error {
	fd, leaf, done, errno := w.OpenParent(rel)
	if errno != 0 {
		return errno
	}
	defer done()
	if mode == 0 {
		var st unix.Stat_t
		return unix.Fstatat(fd, leaf, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	return unix.Faccessat2(fd, leaf, mode, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW)
}

// DenyReason is the error of a failed as-caller check, with its one-line
// reason: EACCES for a refusal (EACCES or EPERM from the kernel, or a rule
// of ours), the kernel's errno for anything else (ENOENT, ELOOP, ...).
func DenyReason(cr Creds, what, rel string, err error) *ctltree.Error {
	errno := syscall.EACCES
	var en syscall.Errno
	if errors.As(err, &en) && en != syscall.EACCES && en != syscall.EPERM {
		errno = en
	}
	return ctltree.Errorf(errno, "uid %d (gid %d) may not %s %s itself: %v (docs/DESIGN.md#as-caller)", cr.Uid, cr.Gid, what, rel, err)
}

// ModeGrants reports whether mode's permission bits, for a file owned by
// uid:gid, grant cr the access bit (4 read, 2 write, 1 execute) by the
// owner, group and other classes (the file's ACL is not consulted).
func ModeGrants(cr Creds, uid, gid, mode uint32, bit uint32) bool {
	switch {
	case cr.Uid == uid:
		return mode>>6&bit != 0
	case cr.Gid == gid || containsU32(cr.Groups, gid):
		return mode>>3&bit != 0
	}
	return mode&bit != 0
}

// containsU32 reports whether v is in s.
func containsU32(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
