package syscallcompat

// A new entry's owner: the daemon creates as root, natively the caller's
// fsuid and fsgid own it (docs/DESIGN.md#posix-owner-ctime).

import (
	"context"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// PreserveOwner gives an entry the daemon just created to the caller, when
// the daemon runs as root (go-fuse's LoopbackNode.PreserveOwner, done with
// fchownat relative to the directory and without following a symlink).
// Like the loopback, a failure is ignored (no error is returned): the entry exists either way.
// name "" is d itself (a file just created and open).
//
// chown(2) clears the setuid and setgid bits of a non-directory, even when
// root calls it and even when the owner does not change (chown_common in
// fs/open.c), but the creator asked for them: natively a file created with
// mode 04777 keeps its setuid bit. So an entry already owned by the caller
// is left alone, and bits the chown cleared are set again from the mode
// the entry was created with. In a set-group-ID directory parent the entry
// keeps the directory's group, as natively (EntryGid); parent is d itself
// when name is not "".
func PreserveOwner(ctx context.Context, parent, d Dir, name string) {
	if os.Getuid() != 0 {
		return
	}
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return
	}
	var st syscall.Stat_t
	if _, errno := StatAt(d, name, &st); errno != 0 {
		return
	}
	gid := EntryGid(parent, c.Gid)
	if st.Uid == c.Uid && (gid == -1 || st.Gid == uint32(gid)) {
		return
	}
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if unix.Fchownat(d.FD, name, int(c.Uid), gid, flags) != nil {
		return
	}
	if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) == 0 || st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return
	}
	if name == "" {
		unix.Fchmod(d.FD, st.Mode&07777)
	} else {
		ChmodAt(d, name, st.Mode&07777) // refuses a symlink (never setuid)
	}
}
