package fusefs

// A handle's own last change, by stat identity
// (docs/DESIGN.md#close-to-open).

import (
	"syscall"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// ownStat is the stat identity a guarded handle's own last change left
// the backing file in: its identity, size, mtime and ctime. The zero value
// knows none. Concurrency: read and written under the handle's mu and the
// file's identity lock.
type ownStat struct {
	ok bool
	st guard.Stat
}

// same reports whether st is the identity s recorded: no change of any
// kind (a write, truncate, chmod, rename in place) reached the file since,
// since each of them sets the ctime anew. The ctime of a file whose stat
// was taken is fine-grained on Linux 6.13+ for ext4, xfs, btrfs and tmpfs
// (multigrain timestamps), and the server's change on NFS, so a later
// change within the same clock tick still gives another ctime.
func (s ownStat) same(st guard.Stat) bool {
	return s.ok && s.st.ID == st.ID && s.st.Size == st.Size && s.st.MtimeNs == st.MtimeNs && s.st.CtimeNs == st.CtimeNs
}

// sameContent reports whether st has the identity, size and mtime s
// recorded: no write or truncate reached the file since (each sets the
// mtime anew, fine-grained as the ctime), while an attribute change
// (chmod, chown, a link or an unlink of another name, a rename) may have.
func (s ownStat) sameContent(st guard.Stat) bool {
	return s.ok && s.st.ID == st.ID && s.st.Size == st.Size && s.st.MtimeNs == st.MtimeNs
}

// noteOwnStat records the stat the handle's own change just left, taken
// from its descriptor. Called under h.mu and the identity lock, right
// after the change.
func (h *File) noteOwnStat() {
	h.own = ownStat{}
	h.fd(func(fd int) syscall.Errno {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil {
			h.own = ownStat{ok: true, st: guard.StatOf(&st)}
			h.fs.cross.NoteOwn(h.id, h.own.st)
		}
		return 0
	})
}

// adoptLateExternal returns last, the file's last mutation, as the
// handle's own when it is an external change reported by the watcher
// after the handle's own last change although the file still has the
// stat that change left: the report is late, of a change (another
// mount's, through the shared backing directory) that came before the
// handle's own, which the guard has already judged by hash. Without this
// a late report revokes the right of a handle that has just truncated the
// file to write it, and the file is left empty. Any other mutation is
// returned as is. Called under h.mu and the identity lock.
func (h *File) adoptLateExternal(last guard.Mutation) guard.Mutation {
	if last.Seq == h.seq || last.Session != sessions.External || !h.own.ok {
		return last
	}
	same := false
	h.fd(func(fd int) syscall.Errno {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil {
			same = h.own.same(guard.StatOf(&st))
		}
		return 0
	})
	if same {
		h.seq = last.Seq
	}
	return last
}

// crossLock takes the cross-mount lock through the handle's own
// descriptor (docs/DESIGN.md#cross-mount-lock) for one mutation through
// it, then tells the guard of a change another mount made since this
// mount's own last change (crossmount.Mode.NoteUnseen), so the handle's right is
// decided again by hash. Called under h.mu and the identity lock.
// Errors: EAGAIN (crossmount.Mode.LockFd).
func (h *File) crossLock() (func(), syscall.Errno) {
	if !h.fs.cross.Shared() {
		return func() {}, 0
	}
	var unlock func()
	var errno syscall.Errno
	h.fd(func(fd int) syscall.Errno {
		unlock, errno = h.fs.cross.LockFd(fd, h.node.rel())
		if errno != 0 {
			return 0
		}
		var st syscall.Stat_t
		if h.fs.cross.FstatView(fd, &st) == nil {
			h.fs.cross.NoteUnseen(h.id, guard.StatOf(&st))
		}
		return 0
	})
	if unlock == nil && errno == 0 {
		unlock = func() {} // EBADF: no descriptor, nothing locked
	}
	return unlock, errno
}
