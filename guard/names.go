package guard

// The names the guard's settings and answers go by, in the config, on the
// command line and in the denial log: its modes, its unlink policy, the
// errnos refused callers may get, the guarded operations and the refusal
// codes.

import (
	"fmt"
	"strings"
	"syscall"
)

// Mode is the guard's mode (--mode).
type Mode int

const (
	// ModeEnforce refuses what the policy denies (EACCES).
	ModeEnforce Mode = iota
	// ModeWarn allows everything and logs what enforce would refuse, for
	// trying rubinofs on a real project first.
	ModeWarn
	// ModeOff neither decides nor tracks.
	ModeOff
)

var modeNames = enumNames{ModeEnforce: "enforce", ModeWarn: "warn", ModeOff: "off"}

// String returns "enforce", "warn" or "off".
func (m Mode) String() string { return modeNames.name(int(m), "mode") }

// ParseMode parses "enforce", "warn" or "off"; anything else is an error
// naming the accepted values.
func ParseMode(s string) (Mode, error) {
	v, err := modeNames.parse(s, "guard mode")
	return Mode(v), err
}

// UnlinkPolicy says whether unlink(2) of an existing file is guarded like
// every other mutation (the config's guard.unlink, the mount's --unlink).
type UnlinkPolicy int

const (
	// UnlinkGuard (the default) refuses deleting a file the session never
	// read ("unread") or whose read is stale ("stale"), so delete-and-
	// recreate cannot bypass read-before-write.
	UnlinkGuard UnlinkPolicy = iota
	// UnlinkAllow lets unlink(2) through without a decision. It loosens the
	// guard: a session may delete any file and create a new one in its
	// place without having read the old one.
	UnlinkAllow
)

var unlinkNames = enumNames{UnlinkGuard: "guard", UnlinkAllow: "allow"}

// String returns "guard" or "allow".
func (u UnlinkPolicy) String() string { return unlinkNames.name(int(u), "unlink") }

// ParseUnlinkPolicy parses "guard" or "allow"; anything else is an error
// naming the accepted values.
func ParseUnlinkPolicy(s string) (UnlinkPolicy, error) {
	v, err := unlinkNames.parse(s, "unlink policy")
	return UnlinkPolicy(v), err
}

// ParseErrno parses the errno a refused caller gets: "EACCES" (the
// default: "Permission denied", a permission decision about this caller and
// this file) or "EPERM" ("Operation not permitted", for tools that treat
// EACCES as retryable or as a mode-bit problem to fix with chmod). Other
// errnos are refused: EBUSY or EAGAIN would invite retries of a write that
// will keep failing, and ENOENT or EIO would misreport the file.
func ParseErrno(s string) (syscall.Errno, error) {
	switch s {
	case "EACCES":
		return syscall.EACCES, nil
	case "EPERM":
		return syscall.EPERM, nil
	}
	return 0, fmt.Errorf("unknown errno %q: want EACCES or EPERM", s)
}

// ErrnoName returns "EACCES" or "EPERM" for the errnos ParseErrno accepts,
// and the errno's number otherwise.
func ErrnoName(e syscall.Errno) string {
	switch e {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	}
	return fmt.Sprintf("errno %d", int(e))
}

// Op is a guarded mutation of an existing regular file.
type Op string

// The guarded operations (docs/DESIGN.md#guarded-ops), as they appear in the
// denial log. Everything else (creating a file, mkdir, rmdir, symlink, link,
// mknod, chmod, chown, utimens, xattrs) is always allowed.
const (
	OpOpenTrunc  Op = "open-trunc"      // open(2) with O_TRUNC: `echo > f`, `cp a f`
	OpWrite      Op = "write"           // the first write(2) through a handle: `>>`, dd conv=notrunc
	OpTruncate   Op = "truncate"        // truncate(2), ftruncate(2)
	OpFallocate  Op = "fallocate"       // fallocate(2)
	OpCopyInto   Op = "copy-file-range" // copy_file_range(2) into the file
	OpRenameOver Op = "rename-over"     // rename(2) onto the file: `mv a f`
	OpExchange   Op = "exchange"        // either side of renameat2 RENAME_EXCHANGE
	OpUnlink     Op = "unlink"          // unlink(2): `rm f`
	// OpMapWrite: a page-in through a guarded writable handle, the fault
	// of a mapping of it (a store through a shared writable mmap(2));
	// refused, the faulting access gets SIGBUS (docs/DESIGN.md#mmap-page-in).
	OpMapWrite Op = "mmap-write"
	// OpOpenRW: a read-write open(2) that the kernel can only give kernel
	// passthrough (another passthrough handle holds the inode), whose
	// shared writable mappings would store into the backing file with no
	// request to the daemon; refused with the configured errno
	// (docs/DESIGN.md#passthrough-mmap-credit).
	OpOpenRW Op = "open-rdwr"
	// OpMoveExempt: a rename to a name the guard does not cover (an
	// exempt path), after which neither the guard nor the journal would
	// see the changes of what moved (docs/DESIGN.md#exempt-widening). Of
	// a guarded file it is decided as an overwrite of the file; of a
	// directory the guard covers, or as either side of an exchange, it is
	// refused with EXDEV (RefuseExemptName), which mv(1) meets by moving
	// the files one by one.
	OpMoveExempt Op = "move-exempt"
	// OpLinkExempt: a hard link of a guarded file at an exempt name,
	// through which writes would change the guarded file unguarded:
	// refused with EXDEV (RefuseExemptName).
	OpLinkExempt Op = "link-exempt"
)

// verb is how a message names op.
func (op Op) verb() string {
	switch op {
	case OpOpenTrunc:
		return "overwrite"
	case OpWrite:
		return "write to"
	case OpTruncate:
		return "truncate"
	case OpFallocate:
		return "fallocate"
	case OpCopyInto:
		return "copy into"
	case OpRenameOver:
		return "replace"
	case OpExchange:
		return "exchange"
	case OpUnlink:
		return "delete"
	case OpMapWrite:
		return "write through a mapping of"
	case OpOpenRW:
		return "open read-write"
	case OpMoveExempt:
		return "move out of the guard"
	case OpLinkExempt:
		return "give an exempt name to"
	}
	return "modify"
}

// Code is why a mutation is refused.
type Code string

const (
	// CodeUnread: the session never read the file.
	CodeUnread Code = "unread"
	// CodeStale: the file changed (by content) since the session read it.
	CodeStale Code = "stale"
	// CodeUnknownSession: the caller's session could not be resolved in
	// time (sessions.Unknown: its /proc files did not answer, it is in
	// execve), so there is no read to check against.
	CodeUnknownSession Code = "unknown-session"
	// CodeExemptName: the change would give what the guard covers a name
	// it does not cover (RefuseExemptName).
	CodeExemptName Code = "exempt-name"
)

// enumNames are the names of a small enum's values, indexed by value.
type enumNames []string

// name returns the name of v, or kind(v) for a value without one.
func (n enumNames) name(v int, kind string) string {
	if v >= 0 && v < len(n) {
		return n[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// parse returns the value named s, or an error naming what (the setting)
// and the accepted names: `unknown guard mode "x": want enforce, warn or off`.
func (n enumNames) parse(s, what string) (int, error) {
	for v, name := range n {
		if name == s {
			return v, nil
		}
	}
	want := n[len(n)-1]
	if len(n) > 1 {
		want = strings.Join(n[:len(n)-1], ", ") + " or " + want
	}
	return 0, fmt.Errorf("unknown %s %q: want %s", what, s, want)
}
