package procfs

// Mount points in the daemon's own mount table, /proc/self/mountinfo:
// whether a path is one, the file system type mounted there, and a watch
// that tells when a mount leaves the table (docs/DESIGN.md#proc-room).
// Parsing is github.com/moby/sys/mountinfo's (its mount points come
// unescaped).

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// selfMountinfo is the daemon's mount table.
const selfMountinfo = "/proc/self/mountinfo"

// mountsIn returns the entries of the mountinfo file at path that filter
// keeps, in the file's order.
func mountsIn(path string, filter mountinfo.FilterFunc) ([]*mountinfo.Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mountinfo.GetMountsFromReader(f, filter)
}

// atMountpoint keeps the entries whose mount point is abs.
func atMountpoint(abs string) mountinfo.FilterFunc {
	return func(m *mountinfo.Info) (skip, stop bool) { return m.Mountpoint != abs, false }
}

// IsMountpoint reports whether the absolute path abs is listed as a mount
// point in /proc/self/mountinfo (live or dead: a dead FUSE mount stays
// listed until it is detached). Errors: those of reading the table.
func IsMountpoint(abs string) (bool, error) { return isMountpointIn(selfMountinfo, abs) }

func isMountpointIn(path, abs string) (bool, error) {
	ms, err := mountsIn(path, mountinfo.SingleEntryFilter(abs))
	return len(ms) > 0, err
}

// MountType returns the file system type ("fuse.rubinofs", "ext4") of the
// last mount at the absolute path abs in /proc/self/mountinfo (the one on
// top), and whether there is one; an unreadable table finds none.
func MountType(abs string) (fstype string, found bool) { return mountTypeIn(selfMountinfo, abs) }

func mountTypeIn(path, abs string) (string, bool) {
	ms, err := mountsIn(path, atMountpoint(abs))
	if err != nil || len(ms) == 0 {
		return "", false
	}
	return ms[len(ms)-1].FSType, true
}

// deviceMountedIn reports whether the mountinfo file at path lists a
// mount of the device major:minor. An unreadable table counts as mounted.
func deviceMountedIn(path string, major, minor int) bool {
	ms, err := mountsIn(path, func(m *mountinfo.Info) (skip, stop bool) {
		hit := m.Major == major && m.Minor == minor
		return !hit, hit
	})
	return err != nil || len(ms) > 0
}

// WatchDetach calls onDetach once, from a goroutine of its own, when the
// mount at mountpoint leaves the mount table: unmounted, or detached lazily
// (`rubinofs unmount --lazy`, umount -l) while files are still open, when
// the server keeps running until they close. The mount is identified by the
// device number stat gives for mountpoint when WatchDetach is called (call
// it once the mount answers, never from a FUSE request handler: the stat is
// served by the mount itself). It watches as WatchTable does. stop ends
// the watch (idempotent) and waits for the goroutine. Errors: those of
// stat and WatchTable.
func WatchDetach(mountpoint string, onDetach func()) (stop func(), err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(mountpoint, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", mountpoint, err)
	}
	major, minor := int(unix.Major(st.Dev)), int(unix.Minor(st.Dev))
	return WatchTable(func() bool {
		if deviceMountedIn(selfMountinfo, major, minor) {
			return true
		}
		onDetach()
		return false
	})
}

// WatchTable calls onChange from a goroutine of its own after every change
// of the daemon's mount table (a mount, an unmount, a detach), until
// onChange returns false or stop is called. It waits on poll(2) POLLPRI of
// /proc/self/mountinfo, which the kernel raises on every such change, so
// it costs nothing while nothing is mounted or unmounted. stop ends the
// watch (idempotent) and waits for the goroutine; call it from no
// onChange. Errors: those of opening mountinfo and pipe2.
func WatchTable(onChange func() bool) (stop func(), err error) {
	mi, err := unix.Open(selfMountinfo, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
		unix.Close(mi)
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(mi)
		for {
			fds := []unix.PollFd{{Fd: int32(mi), Events: unix.POLLPRI}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				return
			}
			if fds[1].Revents != 0 {
				return
			}
			if fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0 && !onChange() {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Write(wake[1], []byte{0})
			<-done
			unix.Close(wake[0])
			unix.Close(wake[1])
		})
	}, nil
}

// Mount is one entry of the mount table: the device it serves (as stat
// reports it in st_dev), where it is mounted, and its source (for a FUSE
// mount, the file system's name: rubinofs gives its workspace), unescaped.
type Mount struct {
	Dev                uint64
	Mountpoint, Source string
}

// MountsOfType returns the entries of /proc/self/mountinfo whose file
// system type is fstype ("fuse.rubinofs"), in the table's order. Errors:
// those of reading the table.
func MountsOfType(fstype string) ([]Mount, error) {
	ms, err := mountsIn(selfMountinfo, mountinfo.FSTypeFilter(fstype))
	if err != nil {
		return nil, err
	}
	out := make([]Mount, len(ms))
	for i, m := range ms {
		out[i] = Mount{Dev: unix.Mkdev(uint32(m.Major), uint32(m.Minor)), Mountpoint: m.Mountpoint, Source: m.Source}
	}
	return out, nil
}
