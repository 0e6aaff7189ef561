package sessions

// Leaving a session never gains reads (docs/DESIGN.md#sessions): the
// processes a session still had when it ended are recorded as having left
// it, by (pid, start time), and a process that left, or a descendant of
// one, resolves to a fresh session of its own (left-PID, no reads, owned
// by the ended session's owner), never to a default session.

import (
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// MaxLeft bounds the processes recorded as having left a session and not
// seen since, in entries. Past it a process that leaves is not recorded
// (it resolves as a process that was never in a session would); dead
// entries are dropped at each end first.
const MaxLeft = 4096

// maxMembers bounds the processes remembered per session as seen through
// it (members), in entries; also how many processes of an ended cgroup
// session's cgroup are recorded.
const maxMembers = 1024

// leftEntry records one process that left session from.
type leftEntry struct {
	owner   uint32 // the ended session's owner: the left session's
	from    string // the session it left
	harness bool   // it was that session's harness root
}

// noteMemberLocked remembers key, a process whose walk found sess through
// one of its roots, as a member of sess (s.mu held): should it outlive the
// session's root, it is recorded as having left (leaveLocked).
func (s *Registry) noteMemberLocked(sess *session, key proc) {
	if sess.members == nil {
		sess.members = map[proc]struct{}{}
	}
	if len(sess.members) < maxMembers {
		sess.members[key] = struct{}{}
	}
}

// leaveLocked records the processes sess still has as having left it
// (s.mu held, sess ending): its root unless rootGone, its joined roots, and
// the members seen through it; their descendants find them on the walk.
// An automatic cgroup session's processes are left alone: their next
// contact makes a new automatic session, which has read nothing either.
func (s *Registry) leaveLocked(sess *session, rootGone bool) {
	if sess.info.Auto {
		return
	}
	add := func(k proc, harness bool) {
		if _, ok := s.left[k]; ok || len(s.left) < MaxLeft {
			s.left[k] = leftEntry{owner: sess.info.Owner, from: sess.info.Name, harness: harness}
		}
	}
	if sess.info.RootPid != 0 && !rootGone {
		add(proc{sess.info.RootPid, sess.info.RootStart}, sess.info.Harness)
	}
	for _, k := range sess.joined {
		add(k, false)
	}
	for k := range sess.members {
		add(k, false)
	}
	sess.members = nil
}

// pruneLeft drops the left entries of processes that are gone (their
// /proc stat is missing or shows another start time), once the map is
// half full. Runs outside s.mu; reads other processes' stat files only.
func (s *Registry) pruneLeft() {
	s.mu.Lock()
	if len(s.left) < MaxLeft/2 {
		s.mu.Unlock()
		return
	}
	keys := make([]proc, 0, len(s.left))
	for k := range s.left {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	var gone []proc
	for _, k := range keys {
		if st, err := s.stat(k.pid); err != nil || st.start != k.start {
			gone = append(gone, k)
		}
	}
	s.mu.Lock()
	for _, k := range gone {
		delete(s.left, k)
	}
	s.mu.Unlock()
}

// leftSession returns the session of a process that left session e.from,
// whose nearest such ancestor (itself included) is key: the live session
// already made for key, else a new one, "left-PID" (a suffix when taken),
// rooted at key's process and owned by e.owner, a harness root again when
// key was the ended session's. When none can be made (the owner's cap, the
// process gone or busy) it is Unknown: its guarded mutations are
// refused and its reads credit nothing, and it is never a default session.
func (s *Registry) leftSession(key proc, e leftEntry) Session {
	base := LeftPrefix + strconv.FormatUint(uint64(key.pid), 10)
	for i := 0; i < 4; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		err := s.registerLeft(key, name, e)
		if err == nil {
			return Session(name)
		}
		s.mu.Lock()
		sess, ok := s.byRoot[key]
		s.mu.Unlock()
		if ok {
			return Session(sess.info.Name) // another request made it first
		}
		if err != ErrSessionExists {
			return Unknown
		}
	}
	return Unknown
}

// registerLeft registers session name rooted at key's process, when that
// process is still key (same start time). Errors: ErrSessionExists (the
// name is taken: try another), any other to give up.
func (s *Registry) registerLeft(key proc, name string, e leftEntry) error {
	got, pidfd, err := s.identify(key.pid)
	if err != nil {
		return err
	}
	if got != key {
		unix.Close(pidfd)
		return ErrProcessGone
	}
	if s.checkName(name, e.owner) != nil {
		unix.Close(pidfd)
		return ErrSessionExists // held by another uid: try another name
	}
	cg := s.cgroupOfBounded(key.pid)
	at := time.Now()
	s.mu.Lock()
	if _, ok := s.byName[name]; ok || s.endedHeldLocked(name, e.owner) != nil {
		s.mu.Unlock()
		unix.Close(pidfd)
		return ErrSessionExists
	}
	if _, ok := s.byRoot[key]; ok {
		s.mu.Unlock()
		unix.Close(pidfd)
		return ErrAlreadyRooted
	}
	if err := s.reserveLocked(e.owner); err != nil {
		s.mu.Unlock()
		unix.Close(pidfd)
		return err
	}
	sess := &session{info: Info{Name: name, Owner: e.owner, RootPid: key.pid, RootStart: key.start,
		Command: "(left " + e.from + ")", Started: time.Now(), Live: true, Harness: e.harness},
		stop: make(chan struct{}), leftFrom: e.from}
	s.byName[name] = sess
	s.byRoot[key] = sess
	s.rootCg[key] = cg
	delete(s.left, key)
	s.gen++
	s.mu.Unlock()
	s.registered(name, at)
	go s.watchExit(sess, pidfd)
	return nil
}

// cgroupMembers returns the processes in the cgroup of sess (and below),
// when sess is rooted at a cgroup and not automatic: ended by End while
// they live, they leave it. Reads the cgroup's cgroup.procs files and
// each process's stat (bounded by procfs.Bound); a process that does not
// answer in time is skipped. Runs outside s.mu.
func (s *Registry) cgroupMembers(sess *session) []proc {
	s.mu.Lock()
	cg, auto := sess.info.Cgroup, sess.info.Auto
	s.mu.Unlock()
	if cg == "" || auto {
		return nil
	}
	pids, err := s.CgroupProcs(cg, maxMembers)
	if err != nil {
		return nil
	}
	out := make([]proc, 0, len(pids))
	for _, pid := range pids {
		if st, err := s.statBounded(pid); err == nil {
			out = append(out, proc{pid, st.start})
		}
	}
	return out
}
