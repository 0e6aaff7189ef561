package fusefs

// Access checks as the caller (docs/DESIGN.md#as-caller). The daemon runs
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

// creds are the credentials an access is checked with: fs uid, fs gid and
// the supplementary groups.
type creds struct {
	uid, gid uint32
	groups   []uint32
}

// credsOf returns the credentials of caller c: its fs uid and gid as the
// kernel reported them and its supplementary groups from
// /proc/PID/status, read within procfs.Bound (docs/DESIGN.md#no-wait-on-caller).
// When the groups cannot be had (no pid, a slow or vanished process, a
// status whose fs ids are not c's, so a reused pid) the credentials have no
// supplementary groups: the check may then refuse what the caller could do
// through a group, never allow more.
func credsOf(c ctltree.Caller) creds {
	cr := creds{uid: c.Uid, gid: c.Gid}
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
		cr.groups = groups
	}
	return cr
}

// errNotAsCaller is asCaller's error when the thread could not take the
// caller's credentials (a daemon that is not root checking another uid).
var errNotAsCaller = errors.New("the daemon cannot take the caller's credentials (it is not root)")

// asCaller runs fn on an OS thread whose fs uid, fs gid and supplementary
// groups are cr's, and returns fn's error (callerThread, for one call).
// Safe for concurrent use: each call has its own goroutine and thread.
func asCaller(cr creds, fn func() error) error {
	t := newCallerThread(cr)
	defer t.close()
	return t.do(fn)
}

// callerThread is an OS thread that holds a caller's credentials and runs
// the functions handed to do, one at a time, until close: a request that
// makes many checks (a diff's paths) pays the credential switch once. fn
// must make its system calls itself, on the calling goroutine (one it
// starts runs with the daemon's credentials). The thread takes the
// daemon's credentials back at close before it is unlocked; a thread that
// could not be restored stays locked to its goroutine, which then ends, so
// the Go runtime ends the thread. A daemon that is not root runs fn with
// its own credentials when they are cr's uid and gid, else every do
// returns errNotAsCaller. do and close may be called from any goroutine
// but not concurrently with each other; close must be called (else the
// thread stays locked).
type callerThread struct {
	work   chan func()
	err    error // why the thread could not take the credentials
	closed bool
}

// newCallerThread starts a callerThread with cr's credentials.
func newCallerThread(cr creds) *callerThread {
	t := &callerThread{}
	if os.Geteuid() != 0 {
		if cr.uid != uint32(os.Geteuid()) || cr.gid != uint32(os.Getegid()) {
			t.err = errNotAsCaller
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
func (t *callerThread) run(cr creds, ready chan<- error) {
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
	if err := setThreadCreds(cr.uid, cr.gid, cr.groups); err != nil {
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

// do runs fn on the thread and returns its error (the thread's own error
// when it could not take the credentials).
func (t *callerThread) do(fn func() error) error {
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

// close ends the thread's service; idempotent.
func (t *callerThread) close() {
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

// accessAs checks, as cr, access mode (unix.R_OK, W_OK, X_OK, or'ed; 0
// only looks the path up) to the workspace-relative path rel ("" is the
// workspace root) without following a final symlink: the walk from the
// workspace root descriptor (prepareAt) is made as cr, so the search
// permission of every directory on the way is checked too, and the leaf
// with faccessat2(AT_EACCESS|AT_SYMLINK_NOFOLLOW), the permission check
// open(2) and the *at calls make. Errors: the kernel's errno (EACCES,
// EPERM, ENOENT, ELOOP, ...), or errNotAsCaller.
func (f *FS) accessAs(cr creds, rel string, mode uint32) error {
	var err error
	f.accessAll(cr, []string{rel}, mode, func(_ int, e error) { err = e })
	return err
}

// accessAll is accessAs for each of rels in one thread switch, calling
// res with each index and its result, in order, from the thread that has
// cr's credentials (res must not block on other goroutines).
func (f *FS) accessAll(cr creds, rels []string, mode uint32, res func(i int, err error)) {
	err := asCaller(cr, func() error {
		for i, rel := range rels {
			res(i, accessHere(f, rel, mode))
		}
		return nil
	})
	if err != nil {
		for i := range rels {
			res(i, err)
		}
	}
}

// accessHere is one accessAs check with the thread's current credentials.
func accessHere(f *FS, rel string, mode uint32) error {
	d, leaf, errno := f.prepareAt(rel)
	if errno != 0 {
		return errno
	}
	defer d.close()
	if mode == 0 {
		var st unix.Stat_t
		return unix.Fstatat(d.fd, leaf, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	return unix.Faccessat2(d.fd, leaf, mode, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW)
}

// denyReason is the error of a failed as-caller check, with its one-line
// reason: EACCES for a refusal (EACCES or EPERM from the kernel, or a rule
// of ours), the kernel's errno for anything else (ENOENT, ELOOP, ...).
func denyReason(cr creds, what, rel string, err error) *ctltree.Error {
	errno := syscall.EACCES
	var en syscall.Errno
	if errors.As(err, &en) && en != syscall.EACCES && en != syscall.EPERM {
		errno = en
	}
	return ctltree.Errorf(errno, "uid %d (gid %d) may not %s %s itself: %v (docs/DESIGN.md#as-caller)", cr.uid, cr.gid, what, rel, err)
}
