package daemon

// The probe of the backing filesystem's ctime: whether a change made
// right after a stat always gets a ctime of its own (docs/DESIGN.md#fine-ctime).

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// fineCtimeRounds is how many write-stat-write-stat rounds the probe
// takes. A coarse clock ticks every 1-10 ms and a round takes a few µs, so
// a filesystem that stamps from it shows two writes of one round with
// equal ctimes in nearly every round; all rounds differing by chance is
// out of reach.
const fineCtimeRounds = 16

// multigrainTypes are the filesystems that have multigrain timestamps
// since Linux 6.13 (statfs f_type: ext2/3/4, XFS, btrfs, tmpfs). The
// probe runs only on them: a network filesystem's stat can come from the
// client's cache, and another host's change from another clock.
var multigrainTypes = map[uint32]bool{0xEF53: true, 0x58465342: true, 0x9123683E: true, 0x01021994: true}

// fineCtime reports whether the backing filesystem (the directory
// backing) gives every change made after a stat a ctime distinct from the
// one that stat saw (FineCtime); the daemon sets guard.Config.FineCtime
// from it.
func fineCtime(backing, dir string) bool {
	fine, _ := FineCtime(backing, dir)
	return fine
}

// FineCtime reports whether the filesystem of the directory backing gives
// every change made after a stat a ctime distinct from the one that stat
// saw (docs/DESIGN.md#fine-ctime): its type has multigrain timestamps,
// and a probe of an unnamed file (O_TMPFILE, never visible in any
// directory) shows it, every round of a write, an fstat, a write and an
// fstat giving two ctimes. The file is made in dir when dir is on the
// backing's filesystem (the state directory: no watcher of the workspace
// sees its writes), else in backing itself, before the watcher starts.
// false when the type is another, or anything fails (a read-only
// workspace): the racy rule stays. why says which, in words for
// `rubinofs doctor`.
func FineCtime(backing, dir string) (fine bool, why string) {
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(backing, &sfs); err != nil {
		return false, "statfs: " + err.Error()
	}
	if !multigrainTypes[uint32(sfs.Type)] {
		return false, fmt.Sprintf("its filesystem (type %#x) is not ext4, XFS, btrfs or tmpfs, the ones with multigrain timestamps", sfs.Type)
	}
	where := backing
	var bst, dst syscall.Stat_t
	if dir != "" && syscall.Stat(backing, &bst) == nil && syscall.Stat(dir, &dst) == nil && bst.Dev == dst.Dev {
		where = dir
	}
	fd, err := unix.Open(where, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false, "cannot make an unnamed probe file in " + where + ": " + err.Error()
	}
	defer unix.Close(fd)
	if !probeCtime(fd, fineCtimeRounds) {
		return false, "two writes right after a stat shared a ctime (coarse timestamps: Linux before 6.13, or seconds-granular inodes)"
	}
	return true, "every change right after a stat got its own ctime (multigrain timestamps)"
}

// probeCtime writes fd and stats it rounds times in pairs; true when every
// pair's two ctimes differ.
func probeCtime(fd, rounds int) bool {
	b := []byte{0}
	for i := 0; i < rounds; i++ {
		var a, c unix.Stat_t
		if _, err := unix.Pwrite(fd, b, 0); err != nil || unix.Fstat(fd, &a) != nil {
			return false
		}
		b[0]++
		if _, err := unix.Pwrite(fd, b, 0); err != nil || unix.Fstat(fd, &c) != nil {
			return false
		}
		if a.Ctim == c.Ctim {
			return false
		}
	}
	return true
}
