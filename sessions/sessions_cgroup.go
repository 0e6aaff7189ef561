package sessions

// Sessions rooted at a cgroup, kept sessions and joined roots
// (docs/DESIGN.md#cgroup-sessions).

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// Errors of RegisterCgroup (the control files map them to errnos).
var (
	// ErrNoCgroup: the cgroup does not exist (ENOENT).
	ErrNoCgroup = errors.New("no such cgroup")
	// ErrInvalidCgroup: the path cannot name a cgroup, or the host has
	// no cgroup v2 hierarchy (EINVAL).
	ErrInvalidCgroup = errors.New("invalid cgroup")
)

// MaxAuto bounds the live sessions of the mount's owner (who owns
// the automatic sessions), in entries, past which no automatic session is
// made: a caller from a matching cgroup then resolves as if the glob did
// not match. Other uids' sessions do not count.
const MaxAuto = 1024

// cgroupCheckTicks is how many 500 ms polls pass between two checks that
// a watched cgroup still exists, should its removal event be missed: 10 s.
const cgroupCheckTicks = 20

// SetAutoCgroups sets the --session-cgroups globs: a caller whose cgroup,
// or an ancestor of it, matches one belongs to an automatic session of the
// deepest such cgroup, made on first contact and named after the cgroup's
// last path element (docs/DESIGN.md#cgroup-sessions). Errors: a glob
// ValidCgroupGlob refuses (nothing is set then). Call before serving.
func (s *Registry) SetAutoCgroups(globs []string) error {
	for _, g := range globs {
		if err := ValidCgroupGlob(g); err != nil {
			return err
		}
	}
	if len(globs) > 0 {
		if _, err := procfs.Cgroup2Mount(); err != nil {
			return fmt.Errorf("--session-cgroups: %w", err)
		}
	}
	s.mu.Lock()
	s.auto = append([]string(nil), globs...)
	s.gen++
	s.mu.Unlock()
	return nil
}

// CgroupOf returns the v2 cgroup of thread pid as the daemon sees it,
// waiting at most procfs.Bound on /proc. Errors: ErrProcessGone,
// ErrProcessBusy, ErrInvalidCgroup (no v2 hierarchy).
func (s *Registry) CgroupOf(pid uint32) (string, error) {
	if _, err := procfs.Cgroup2Mount(); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidCgroup, err)
	}
	cg, err := procfs.BoundedErr(fmt.Sprintf("cgroup:%p:%d", s, pid), "", func() (string, error) {
		return procCgroup(s.procDir, pid)
	})
	switch {
	case errors.Is(err, procfs.ErrSlow):
		return "", fmt.Errorf("%w: pid %d: %v", ErrProcessBusy, pid, err)
	case errors.Is(err, procfs.ErrNoCgroup2):
		return "", fmt.Errorf("%w: pid %d: %v", ErrInvalidCgroup, pid, err)
	case err != nil:
		return "", fmt.Errorf("%w: pid %d: %v", ErrProcessGone, pid, err)
	}
	return cg, nil
}

// cgroupOfBounded is CgroupOf without the reason: "" when unknown.
func (s *Registry) cgroupOfBounded(pid uint32) string {
	cg, _ := s.CgroupOf(pid)
	return cg
}

// RegisterCgroup makes cgroup cg (a path in the v2 hierarchy, or a
// directory under its mount point) the root of a new session name: every
// process in it or below it belongs to the session, whatever its parent.
// The session ends when the cgroup is removed (an inotify watch on its
// directory, checked again every 10 s) or by End. With removeEmpty the
// daemon removes the cgroup once it has held a process and is empty again.
// Errors: ErrInvalidSession, ErrInvalidCgroup, ErrNoCgroup,
// ErrSessionExists, ErrAlreadyRooted (the cgroup roots another session).
func (s *Registry) RegisterCgroup(name, cg, cmd string, removeEmpty bool) error {
	return s.RegisterCgroupFor(s.MountOwner, name, cg, cmd, removeEmpty)
}

// RegisterCgroupFor is RegisterCgroup for a session owned by uid owner.
// Errors: those of RegisterCgroup and ErrTooManySessions.
func (s *Registry) RegisterCgroupFor(owner uint32, name, cg, cmd string, removeEmpty bool) error {
	return s.registerCgroup(Info{Name: name, Owner: owner, Cgroup: cg, Command: cmd, RemoveEmpty: removeEmpty})
}

// registerCgroup registers the cgroup session info describes.
func (s *Registry) registerCgroup(info Info) error {
	if err := ValidName(info.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSession, err)
	}
	mnt, err := procfs.Cgroup2Mount()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCgroup, err)
	}
	if info.Cgroup, err = CgroupPath(info.Cgroup, mnt); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCgroup, err)
	}
	info.RootPid, info.RootStart, info.Live, info.Keep = 0, 0, true, false
	if info.Started.IsZero() {
		info.Started = time.Now()
	}
	if err := s.checkName(info.Name, info.Owner); err != nil {
		return err
	}
	at := time.Now()
	sess := &session{info: info, stop: make(chan struct{})}
	s.mu.Lock()
	if _, ok := s.byName[info.Name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrSessionExists, info.Name)
	}
	if err := s.endedHeldLocked(info.Name, info.Owner); err != nil {
		s.mu.Unlock()
		return err
	}
	if other, ok := s.byCgroup[info.Cgroup]; ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: cgroup %s is the root of %s", ErrAlreadyRooted, info.Cgroup, other.info.Name)
	}
	if err := s.reserveLocked(info.Owner); err != nil {
		s.mu.Unlock()
		return err
	}
	if err := s.watchCgroupLocked(sess, cgroupDir(mnt, info.Cgroup)); err != nil {
		s.unreserveLocked(info.Owner)
		s.mu.Unlock()
		return fmt.Errorf("%w: %s: %v", ErrNoCgroup, info.Cgroup, err)
	}
	s.byName[info.Name] = sess
	s.byCgroup[info.Cgroup] = sess
	s.gen++
	s.mu.Unlock()
	s.registered(info.Name, at)
	if info.RemoveEmpty {
		s.cgroupGone(sess) // its current state: populated already?
	}
	return nil
}

// RegisterKept registers a session with no root: it stays until End, and
// processes become part of it by Join (rubinofs session new --keep).
// Errors: ErrInvalidSession, ErrSessionExists.
func (s *Registry) RegisterKept(name, cmd string) error {
	return s.RegisterKeptFor(s.MountOwner, name, cmd)
}

// RegisterKeptFor is RegisterKept for a session owned by uid owner.
// Errors: those of RegisterKept and ErrTooManySessions.
func (s *Registry) RegisterKeptFor(owner uint32, name, cmd string) error {
	return s.registerKept(Info{Name: name, Owner: owner, Command: cmd})
}

func (s *Registry) registerKept(info Info) error {
	if err := ValidName(info.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSession, err)
	}
	info.RootPid, info.RootStart, info.Cgroup, info.Live, info.Keep = 0, 0, "", true, true
	if info.Started.IsZero() {
		info.Started = time.Now()
	}
	if err := s.checkName(info.Name, info.Owner); err != nil {
		return err
	}
	at := time.Now()
	s.mu.Lock()
	if _, ok := s.byName[info.Name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrSessionExists, info.Name)
	}
	if err := s.endedHeldLocked(info.Name, info.Owner); err != nil {
		s.mu.Unlock()
		return err
	}
	if err := s.reserveLocked(info.Owner); err != nil {
		s.mu.Unlock()
		return err
	}
	s.byName[info.Name] = &session{info: info, stop: make(chan struct{})}
	s.gen++
	s.mu.Unlock()
	s.registered(info.Name, at)
	return nil
}

// Join makes the process of thread pid an extra root of the live session
// name: it and its descendants belong to the session until it exits,
// which does not end the session. Joining shares the session's reads, so
// the control files allow it only to the mount's owner. Errors:
// ErrNoSession, ErrProcessGone, ErrProcessBusy, ErrAlreadyRooted (the
// process roots another session).
func (s *Registry) Join(name string, pid uint32) error {
	key, pidfd, err := s.identify(pid)
	if err != nil {
		return err
	}
	cg := s.cgroupOfBounded(key.pid)
	s.mu.Lock()
	sess, live := s.byName[name]
	other, taken := s.byRoot[key]
	if !live || taken {
		s.mu.Unlock()
		unix.Close(pidfd)
		switch {
		case !live:
			return fmt.Errorf("%w: %s", ErrNoSession, name)
		case other != sess:
			return fmt.Errorf("%w: pid %d is the root of %s", ErrAlreadyRooted, key.pid, other.info.Name)
		}
		return nil // already a root of this session
	}
	s.byRoot[key] = sess
	s.rootCg[key] = cg
	sess.joined = append(sess.joined, key)
	s.gen++
	s.mu.Unlock()
	go func() {
		defer unix.Close(pidfd)
		if !pollUntil(sess.stop, pidfd, func(readable bool) bool { return readable }) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.byRoot[key] == sess {
			delete(s.byRoot, key)
			delete(s.rootCg, key)
			s.gen++
		}
		for i, k := range sess.joined {
			if k == key {
				sess.joined = append(sess.joined[:i], sess.joined[i+1:]...)
				break
			}
		}
	}()
	return nil
}

// restoreRootless re-registers a saved cgroup or kept session (Restore).
func (s *Registry) restoreRootless(info Info) error {
	if info.Cgroup != "" {
		return s.registerCgroup(info)
	}
	if info.Keep {
		return s.registerKept(info)
	}
	return fmt.Errorf("%w: session %s has no root", ErrProcessGone, info.Name)
}

// dropRootsLocked removes every root of sess from the maps (s.mu held).
func (s *Registry) dropRootsLocked(sess *session) {
	if sess.info.RootPid != 0 {
		k := proc{sess.info.RootPid, sess.info.RootStart}
		delete(s.byRoot, k)
		delete(s.rootCg, k)
	}
	for _, k := range sess.joined {
		if s.byRoot[k] == sess {
			delete(s.byRoot, k)
			delete(s.rootCg, k)
		}
	}
	if cg := sess.info.Cgroup; cg != "" && s.byCgroup[cg] == sess {
		delete(s.byCgroup, cg)
	}
}

// callerCgroup returns the cgroup session of thread tid: the session of
// the deepest registered cgroup at or above the thread's cgroup, or an
// automatic session made now when a --session-cgroups glob matches a
// deeper one; Default when neither. With no cgroup session and no
// glob it reads nothing. Unbounded: Resolve runs it inside procfs.Bounded.
func (s *Registry) callerCgroup(tid uint32) Session {
	s.mu.Lock()
	active := len(s.byCgroup) > 0 || len(s.auto) > 0
	s.mu.Unlock()
	if !active {
		return Default
	}
	cg, err := procCgroup(s.procDir, tid)
	if err != nil {
		return Default
	}
	s.mu.Lock()
	sess, depth := s.deepestLocked(cg)
	match, mdepth := s.autoMatchLocked(cg)
	live := s.perOwner[s.MountOwner] // automatic sessions are the mount owner's: another uid's never block them
	s.mu.Unlock()
	if match != "" && mdepth > depth && live < MaxAuto {
		if name, err := s.registerAuto(match); err == nil {
			return Session(name)
		}
		s.mu.Lock()
		sess, _ = s.deepestLocked(cg) // another request made it first
		s.mu.Unlock()
	}
	if sess == nil {
		return Default
	}
	return Session(sess.info.Name)
}

// deepestLocked returns the session of the deepest registered cgroup at
// or above cg and that cgroup's depth (path elements; -1 for none).
func (s *Registry) deepestLocked(cg string) (*session, int) {
	if cg == "" || len(s.byCgroup) == 0 {
		return nil, -1
	}
	for p := cg; ; p = path.Dir(p) {
		if sess, ok := s.byCgroup[p]; ok {
			return sess, cgroupDepth(p)
		}
		if p == "/" || p == "." {
			return nil, -1
		}
	}
}

// autoMatchLocked returns the deepest cgroup at or above cg that matches
// a --session-cgroups glob, and its depth ("" and -1 for none).
func (s *Registry) autoMatchLocked(cg string) (string, int) {
	if len(s.auto) == 0 {
		return "", -1
	}
	for p := cg; ; p = path.Dir(p) {
		for _, g := range s.auto {
			if ok, _ := doublestar.Match(g, p); ok {
				return p, cgroupDepth(p)
			}
		}
		if p == "/" || p == "." {
			return "", -1
		}
	}
}

// cgroupDepth counts the path elements of cg ("/" is 0).
func cgroupDepth(cg string) int {
	if cg == "/" {
		return 0
	}
	return strings.Count(cg, "/")
}

// nestsLocked reports whether the pid root key of sess counts for a
// caller whose cgroup session is cgSess: the root was, when it
// registered, in a cgroup whose session is cgSess (a `rubinofs run`
// inside a container nests in the container's session), or sess is
// cgSess itself. With no cgroup session every root counts, as before
// cgroups.
func (s *Registry) nestsLocked(key proc, sess *session, cgSess Session) bool {
	if len(s.byCgroup) == 0 || Session(sess.info.Name) == cgSess {
		return true
	}
	outer, _ := s.deepestLocked(s.rootCg[key])
	if outer == nil {
		return cgSess == Default
	}
	return Session(outer.info.Name) == cgSess
}

// registerAuto registers the automatic session of cgroup cg, named after
// its last path element (autoSessionName); a name already taken, or not a
// valid session name, gets a suffix or prefix from the path's hash.
func (s *Registry) registerAuto(cg string) (string, error) {
	name := autoSessionName(cg)
	h := fnv.New32a()
	h.Write([]byte(cg))
	sum := fmt.Sprintf("%08x", h.Sum32())
	if ValidName(name) != nil || strings.HasPrefix(name, TaskPrefix) {
		name = "cg-" + sum
	}
	err := s.registerCgroup(Info{Name: name, Owner: s.MountOwner, Cgroup: cg, Command: "(cgroup " + cg + ")", Auto: true})
	if errors.Is(err, ErrSessionExists) {
		if len(name) > MaxName-9 {
			name = name[:MaxName-9]
		}
		name += "-" + sum
		err = s.registerCgroup(Info{Name: name, Owner: s.MountOwner, Cgroup: cg, Command: "(cgroup " + cg + ")", Auto: true})
	}
	return name, err
}

// CgroupProcs returns the processes in cgroup cg and below it (at most
// max; more is an error), for the control files' authorisation. Errors:
// ErrInvalidCgroup, ErrNoCgroup, and a cgroup holding more than max.
func (s *Registry) CgroupProcs(cg string, max int) ([]uint32, error) {
	mnt, err := procfs.Cgroup2Mount()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCgroup, err)
	}
	if cg, err = CgroupPath(cg, mnt); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCgroup, err)
	}
	var out []uint32
	var walk func(dir string) error
	walk = func(dir string) error {
		b, err := os.ReadFile(dir + "/cgroup.procs")
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			var pid uint32
			if _, err := fmt.Sscan(f, &pid); err == nil {
				out = append(out, pid)
			}
		}
		if len(out) > max {
			return fmt.Errorf("cgroup %s holds more than %d processes", cg, max)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.IsDir() {
				if err := walk(dir + "/" + e.Name()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(cgroupDir(mnt, cg)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNoCgroup, cg)
		}
		return nil, err
	}
	return out, nil
}
