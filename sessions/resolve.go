package sessions

// Resolving a calling thread to its session: the cached walk up the
// process tree, the cgroup and POSIX-session fallbacks, and the descendant
// test (docs/DESIGN.md#sessions), each bounded on request paths
// (docs/DESIGN.md#no-wait-on-caller).

import (
	"fmt"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// maxDepth bounds the parent walk (a cycle cannot happen in /proc, but a
// racing reparent could make a walk long).
const maxDepth = 128

// Resolve returns the session of the thread tid (a FUSE request's pid is
// the calling thread's id). It never fails and never waits longer than
// procfs.Bound on /proc (docs/DESIGN.md#no-wait-on-caller): a thread that
// cannot be read (gone) resolves to Default; one whose /proc files
// did not answer in time (it is in execve) resolves to its cached session
// when that is still valid for the current set of sessions, else to
// Unknown.
func (s *Registry) Resolve(tid uint32) Session {
	s.mu.Lock()
	if s.count == 0 && len(s.auto) == 0 && len(s.left) == 0 {
		s.mu.Unlock()
		return Default
	}
	c, hit := s.cache[tid]
	gen := s.gen
	s.mu.Unlock()
	// A cached answer still valid is checked inline: keptAlive reads only
	// a kept comm descriptor, which never waits on the thread
	// (docs/DESIGN.md#kept-proc-fds).
	if hit && c.gen == gen && s.procDir == "/proc" && keptAlive(tid, c.start) {
		return c.session
	}
	name, ok := procfs.Bounded(fmt.Sprintf("resolve:%p:%d", s, tid), func() Session { return s.resolve(tid) })
	if ok {
		return name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The cached entry cannot be validated (its start time is what did not
	// answer); a recycled tid within the bound is far less likely than the
	// exec this thread is in. An entry from another generation may name an
	// ended session or miss a new one: unknown then.
	if c, hit := s.cache[tid]; hit && c.gen == s.gen {
		return c.session
	}
	return Unknown
}

// resolve is Resolve's /proc work, unbounded: on a cache hit one read of
// the thread's kept comm descriptor (keptAlive) or of its stat, the walk
// otherwise.
func (s *Registry) resolve(tid uint32) Session {
	s.mu.Lock()
	c, ok := s.cache[tid]
	gen := s.gen
	s.mu.Unlock()
	if ok && c.gen == gen && s.procDir == "/proc" && keptAlive(tid, c.start) {
		return c.session // the same thread: its start time is c.start
	}
	st, err := s.stat(tid)
	if err != nil {
		return Default
	}
	if ok && c.gen == gen && c.start == st.start {
		return c.session
	}
	name := s.walk(tid, st)
	s.mu.Lock()
	if s.gen == gen {
		if len(s.cache) > 1<<14 {
			s.cache = map[uint32]cached{}
		}
		s.cache[tid] = cached{start: st.start, session: name, gen: gen}
	}
	s.mu.Unlock()
	return name
}

// walk finds the session of tid by its thread group and ancestors.
//
// With cgroup sessions registered (or --session-cgroups globs), the
// thread's cgroup session is found first (callerCgroup, one read of
// /proc/<tid>/cgroup) and is the answer unless a pid root on the walk
// nests in it (docs/DESIGN.md#cgroup-sessions).
func (s *Registry) walk(tid uint32, st procStat) Session {
	cgSess := s.callerCgroup(tid) // sessions_cgroup.go; Default without one
	pid, st, err := s.leader(tid, st)
	if err != nil {
		return cgSess
	}
	callerSid, callerStart := st.sid, st.start
	var walked []proc
	// A process that left a session (or descends from one that did)
	// resolves to a left session: the topmost left process of the same
	// ended session on the walk roots it (sessions_left.go).
	var leftKey proc
	var leftE leftEntry
	found := false
	for i := 0; i < maxDepth && pid > 1; i++ {
		s.mu.Lock()
		key := proc{pid, st.start}
		sess, ok := s.byRoot[key]
		ok = ok && s.nestsLocked(key, sess, cgSess)
		if ok && found && sess.leftFrom != leftE.from {
			s.mu.Unlock()
			return s.leftSession(leftKey, leftE) // a session above the one it left
		}
		if ok && !found {
			for _, k := range walked { // the processes below the root
				s.noteMemberLocked(sess, k)
			}
		}
		walked = append(walked, key)
		if !ok {
			if e, isLeft := s.left[key]; isLeft && (!found || e.from == leftE.from) {
				leftKey, leftE, found = key, e, true
			}
		}
		s.mu.Unlock()
		if ok {
			return Session(sess.info.Name)
		}
		parent := st.ppid
		next, err := s.stat(parent)
		if err != nil || next.start > st.start {
			// The parent is gone, or parent's pid was reused by a process
			// younger than its supposed child.
			break
		}
		pid, st = parent, next
	}
	if found {
		return s.leftSession(leftKey, leftE)
	}
	if name, ok := s.bySid(callerSid, callerStart, cgSess); ok {
		return name
	}
	return cgSess
}

// bySid is the walk's last resort for a process whose ancestry reaches no
// root (it was reparented: a double fork): the session rooted at the
// leader of its POSIX session, when that leader is a registered root, as
// a task is (docs/DESIGN.md#sessions). A POSIX session cannot be joined,
// only left (setsid), and its id stays the leader's pid, never reused
// while a process is in the session, so the process was started in the
// root's session. The leader must be older than the process and nest in
// its cgroup session.
func (s *Registry) bySid(sid uint32, start uint64, cgSess Session) (Session, bool) {
	if sid <= 1 {
		return "", false
	}
	lst, err := s.stat(sid)
	if err != nil || lst.sid != sid || lst.start > start {
		return "", false
	}
	key := proc{sid, lst.start}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byRoot[key]
	if !ok || !s.nestsLocked(key, sess, cgSess) {
		return "", false
	}
	return Session(sess.info.Name), true
}

// IsDescendant reports whether the process of thread pid is the process of
// thread ancestor or descends from it, by the same (pid, start time) walk as
// Resolve. Both may be thread ids (FUSE reports the calling thread). It
// waits at most procfs.Bound on /proc, and reports false when the walk did not
// finish by then (one of the processes is in execve).
func (s *Registry) IsDescendant(pid, ancestor uint32) bool {
	yes, ok := procfs.Bounded(fmt.Sprintf("descendant:%p:%d:%d", s, pid, ancestor), func() bool {
		return s.isDescendant(pid, ancestor)
	})
	return ok && yes
}

// isDescendant is IsDescendant's /proc walk, unbounded.
func (s *Registry) isDescendant(pid, ancestor uint32) bool {
	ast, err := s.stat(ancestor)
	if err != nil {
		return false
	}
	if ancestor, _, err = s.leader(ancestor, ast); err != nil {
		return false
	}
	st, err := s.stat(pid)
	if err != nil {
		return false
	}
	if pid, st, err = s.leader(pid, st); err != nil {
		return false
	}
	for i := 0; i < maxDepth && pid > 1; i++ {
		if pid == ancestor {
			return true
		}
		next, err := s.stat(st.ppid)
		if err != nil || next.start > st.start {
			return false
		}
		pid, st = st.ppid, next
	}
	return false
}
