package sessions

// Noticing that a session's cgroup was removed, or emptied
// (docs/DESIGN.md#cgroup-sessions).

import (
	"bytes"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// cgroupWatcher notices removed cgroups for every cgroup session of one
// registry with one inotify instance (the default limit is 128 instances
// per user): a watch on each session cgroup's parent directory reports the
// removal (IN_DELETE; cgroupfs sends no IN_DELETE_SELF), a watch on
// cgroup.events of each RemoveEmpty session reports it emptied
// (IN_MODIFY). After any event, and every cgroupCheckTicks polls should an
// event be missed, every cgroup session's directory is looked at. Its
// goroutine ends, closing the instance, once no cgroup session is left.
type cgroupWatcher struct {
	fd int
}

// watchCgroupLocked starts watching the directory dir of the new session
// sess (s.mu held). Errors: the directory is missing, or inotify failed.
func (s *Registry) watchCgroupLocked(sess *session, dir string) error {
	if s.cgw == nil {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		if err != nil {
			return err
		}
		s.cgw = &cgroupWatcher{fd: fd}
		go s.runCgroupWatcher(s.cgw)
	}
	// The watch first, then the check: a removal in between is an event.
	if _, err := unix.InotifyAddWatch(s.cgw.fd, path.Dir(dir), unix.IN_DELETE|unix.IN_ONLYDIR); err != nil {
		return err
	}
	if sess.info.RemoveEmpty {
		if _, err := unix.InotifyAddWatch(s.cgw.fd, dir+"/cgroup.events", unix.IN_MODIFY); err != nil {
			return err
		}
	}
	if _, err := os.Stat(dir + "/cgroup.procs"); err != nil {
		return err
	}
	return nil
}

// runCgroupWatcher is w's goroutine.
func (s *Registry) runCgroupWatcher(w *cgroupWatcher) {
	ticks := 0
	stop := make(chan struct{})
	pollUntil(stop, w.fd, func(readable bool) bool {
		ticks++
		var buf [4096]byte
		for readable {
			if n, err := unix.Read(w.fd, buf[:]); n <= 0 || err != nil {
				break
			}
		}
		s.mu.Lock()
		if len(s.byCgroup) == 0 {
			s.cgw = nil // the next cgroup session starts another
			s.mu.Unlock()
			unix.Close(w.fd)
			return true
		}
		if !readable && ticks%cgroupCheckTicks != 0 {
			s.mu.Unlock()
			return false
		}
		sessions := make([]*session, 0, len(s.byCgroup))
		for _, sess := range s.byCgroup {
			sessions = append(sessions, sess)
		}
		s.mu.Unlock()
		for _, sess := range sessions {
			if s.cgroupGone(sess) {
				s.end(sess, true) // the cgroup is gone: no process is left in it
			}
		}
		return false
	})
}

// cgroupGone reports whether the cgroup of sess was removed; with
// RemoveEmpty it first removes the cgroup when it has held a process and
// is empty again.
func (s *Registry) cgroupGone(sess *session) bool {
	mnt, _ := procfs.Cgroup2Mount()
	dir := cgroupDir(mnt, sess.info.Cgroup)
	if sess.info.RemoveEmpty {
		b, err := os.ReadFile(dir + "/cgroup.events")
		s.mu.Lock()
		populated := sess.populated
		switch {
		case err != nil:
		case bytes.Contains(b, []byte("populated 1")):
			sess.populated = true
		case populated && bytes.Contains(b, []byte("populated 0")):
			unix.Rmdir(dir) // EBUSY when a child cgroup or a process came in since: kept
		}
		s.mu.Unlock()
	}
	_, err := os.Stat(dir + "/cgroup.procs")
	return err != nil
}
