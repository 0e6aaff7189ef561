package sessions

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// Info describes one registered session.
type Info struct {
	Name string `json:"name"`
	// Owner is the uid the session belongs to: the caller that registered
	// it (a task's spawner; Registry.MountOwner for automatic cgroup
	// sessions and for registrations that name none). Only callers of
	// that uid from outside every session, the mount's owner and root may
	// see or act on it through the control files (docs/DESIGN.md#sessions).
	Owner     uint32    `json:"owner"`
	RootPid   uint32    `json:"root_pid"`
	RootStart uint64    `json:"root_start"` // the root's start time, clock ticks since boot (/proc/<pid>/stat field 22)
	Command   string    `json:"command"`
	Started   time.Time `json:"started"`
	Live      bool      `json:"live"`
	Ended     time.Time `json:"ended,omitzero"`
	// Harness: the root is an agent harness (rubinofs run --harness): its
	// own reads do not count (docs/DESIGN.md#scanner-reads).
	Harness bool `json:"harness,omitempty"`
	// Cgroup is the root cgroup of a cgroup-rooted session (RootPid 0):
	// its path in the v2 hierarchy as the daemon sees it
	// (docs/DESIGN.md#cgroup-sessions).
	Cgroup string `json:"cgroup,omitempty"`
	// Auto: the session was made on first contact from a cgroup matching
	// a --session-cgroups glob.
	Auto bool `json:"auto,omitempty"`
	// Keep: the session has no root and stays until it is ended
	// (rubinofs session new --keep); processes join it.
	Keep bool `json:"keep,omitempty"`
	// RemoveEmpty: the daemon removes the session's cgroup once it has
	// held a process and is empty again, which ends the session (rubinofs
	// run --cgroup).
	RemoveEmpty bool `json:"remove_empty,omitempty"`
}

// RootKind names what a session is rooted at: "pid", "cgroup" or "none"
// (a kept session with no root).
func (si Info) RootKind() string {
	switch {
	case si.Cgroup != "":
		return "cgroup"
	case si.RootPid != 0:
		return "pid"
	}
	return "none"
}

// proc identifies a process across pid reuse: a pid and its start time.
type proc struct {
	pid   uint32
	start uint64
}

type session struct {
	info Info
	stop chan struct{} // closed to stop the exit watcher
	// joined are the extra root processes that joined the session (Join);
	// each leaves byRoot when it exits, without ending the session.
	joined []proc
	// populated: a RemoveEmpty cgroup has held a process (s.mu).
	populated bool
	// members are processes seen through one of its roots (s.mu;
	// sessions_left.go), recorded as having left when it ends.
	members map[proc]struct{}
	// leftFrom names the session this one's root left ("" for any other
	// session; sessions_left.go).
	leftFrom string
}

type cached struct {
	start   uint64
	session Session
	gen     uint64
}

// Registry maps callers to guard sessions by process tree: a caller belongs
// to the session whose registered root is its nearest ancestor (itself
// included), found by walking parent pids in /proc. Every process on the
// walk is identified by (pid, start time), so a recycled pid never inherits
// a session. Callers under no root belong to Default.
//
// A descendant that daemonises (double-forks and is reparented to init or a
// subreaper) leaves the tree and from then on resolves to Default, as
// does every former member once the root has exited.
//
// A session ends when its root process exits (noticed at once through a
// pidfd) or by End. Its tracker is dropped at once through OnEnd: no process
// can resolve to an ended session, so its records could never be used again.
// The last MaxEnded ended sessions stay listed (Live false) with their
// denials in the guard's log.
//
// Concurrency: all methods are safe for concurrent use. Resolve is on the
// FUSE hot path: with no session registered it reads nothing; otherwise a
// cache hit costs one read of /proc/<tid>/stat to validate the start time.
// Every /proc read of Resolve, Register and IsDescendant is bounded by
// procfs.Bound (internal/procfs), since they run while serving a request.
type Registry struct {
	// OnEnd is called (outside locks) with the name of each session that
	// ends; the daemon drops its tracker. Set before use.
	OnEnd func(name string)
	// MaxEnded bounds the ended sessions kept for display (default 64).
	MaxEnded int
	// MountOwner is the uid of the mount's owner: the owner of sessions
	// registered without one (Register, RegisterAs, automatic cgroup
	// sessions). Set before use.
	MountOwner uint32
	// MaxPerOwner bounds the live sessions of one owner uid (default
	// DefaultMaxPerOwner): past it a registration fails with
	// ErrTooManySessions, so one uid cannot use up another's.
	MaxPerOwner int
	// NameHeld, when set, is asked (outside locks) before a name is
	// registered for owner: an error (wrapping ErrSessionExists) refuses
	// it, because state the registry does not keep (a journal log of an
	// earlier session of that name) belongs to another uid
	// (docs/DESIGN.md#session-names).
	NameHeld func(name string, owner uint32) error
	// OnRegister, when set, is called (outside locks) with each name
	// registered (or renamed to) and a time taken before the session
	// could be resolved, before the registration returns: what the
	// daemon keeps by name from before that time (an earlier session's
	// denials, its errors) is dropped, so a new session starts with none
	// (docs/DESIGN.md#session-names).
	OnRegister func(name string, at time.Time)
	// KeptOwner, when set, answers OwnerOf for a session the registry
	// no longer lists (ended and pushed out of the ended list, or from
	// before a restart) from what the daemon keeps of it: the uid its
	// journal log names (docs/DESIGN.md#session-names). Called outside
	// locks.
	KeptOwner func(name string) (uint32, bool)
	procDir   string

	mu     sync.Mutex
	byName map[string]*session
	byRoot map[proc]*session
	// rootCg is the v2 cgroup each pid root was in when it registered
	// ("" unknown): a pid root counts for a caller only when it nests in
	// the caller's cgroup session (docs/DESIGN.md#cgroup-sessions).
	rootCg map[proc]string
	// byCgroup maps cgroup paths to the cgroup-rooted sessions; auto are
	// the --session-cgroups globs.
	byCgroup map[string]*session
	auto     []string
	cgw      *cgroupWatcher // nil while no cgroup session is registered
	ended    []Info
	cache    map[uint32]cached
	gen      uint64
	count    int            // live sessions, read without the lock on the fast path
	perOwner map[uint32]int // live sessions by owner uid
	// left records processes that left a session and have not been seen
	// since (sessions_left.go), at most MaxLeft.
	left map[proc]leftEntry
}

// DefaultMaxPerOwner is the default of Registry.MaxPerOwner, in live
// sessions per owner uid.
const DefaultMaxPerOwner = 1024

// NewRegistry returns an empty registry reading /proc.
func NewRegistry() *Registry {
	return &Registry{MaxEnded: 64, procDir: "/proc", byName: map[string]*session{},
		byRoot: map[proc]*session{}, cache: map[uint32]cached{}, rootCg: map[proc]string{},
		byCgroup: map[string]*session{}, perOwner: map[uint32]int{}, left: map[proc]leftEntry{}}
}

// MaxName is the longest session name, in bytes.
const MaxName = 64

// sessionName is what a session may be called: it becomes a directory name
// under .rubino/sessions and an environment value, so never a path: no
// '/', no NUL, no white space, never "." or ".." (it starts alphanumeric).
var sessionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether name can name a session: 1 to
// MaxName of [A-Za-z0-9._-], starting alphanumeric, and not
// "default". The error quotes a bad name in ASCII, clipped to 80 bytes.
func ValidName(name string) error {
	if _, ok := DefaultUID(name, 0); ok {
		return fmt.Errorf("%q is a session of unregistered callers (default, default-UID)", name)
	}
	if !sessionName.MatchString(name) {
		shown := strconv.QuoteToASCII(name)
		if len(shown) > 80 {
			shown = shown[:80] + "..."
		}
		return fmt.Errorf("invalid session name %s: want 1-%d of [A-Za-z0-9._-], starting with a letter or digit", shown, MaxName)
	}
	return nil
}

// Errors of Register, End and Rename (the control files map them to errnos).
var (
	ErrSessionExists = errors.New("session exists")  // EEXIST
	ErrNoSession     = errors.New("no such session") // ENOENT
	ErrProcessGone   = errors.New("no such process") // ESRCH
	// ErrProcessBusy: the process's /proc files did not answer within
	// procfs.Bound (it is in execve); trying again shortly will work.
	ErrProcessBusy    = errors.New("process busy")
	ErrAlreadyRooted  = errors.New("process is already a session root")
	ErrInvalidSession = errors.New("invalid session name")
	// ErrTooManySessions: the owner has MaxPerOwner live sessions; one
	// must end first (EAGAIN).
	ErrTooManySessions = errors.New("too many live sessions")
)

// reserveLocked counts one more live session of owner, or refuses with
// ErrTooManySessions past MaxPerOwner (s.mu held). end releases it.
func (s *Registry) reserveLocked(owner uint32) error {
	max := s.MaxPerOwner
	if max <= 0 {
		max = DefaultMaxPerOwner
	}
	if n := s.perOwner[owner]; n >= max {
		return fmt.Errorf("%w: uid %d has %d live sessions, the limit is %d (sessions.max_live, --max-live-sessions); end one first (rubinofs session end NAME)", ErrTooManySessions, owner, n, max)
	}
	s.perOwner[owner]++
	s.count++
	return nil
}

// unreserveLocked undoes reserveLocked (s.mu held).
func (s *Registry) unreserveLocked(owner uint32) {
	s.count--
	if s.perOwner[owner]--; s.perOwner[owner] <= 0 {
		delete(s.perOwner, owner)
	}
}

// checkName refuses name for owner when another uid holds it: an ended
// session of that name still listed, owned by another uid, or NameHeld's
// answer. Called without s.mu; it takes it.
func (s *Registry) checkName(name string, owner uint32) error {
	s.mu.Lock()
	err := s.endedHeldLocked(name, owner)
	s.mu.Unlock()
	if err == nil && s.NameHeld != nil {
		err = s.NameHeld(name, owner)
	}
	return err
}

// endedHeldLocked is checkName's test of the ended list, which each
// registration repeats under s.mu where it adds the name (a session of
// another uid may have ended since checkName).
func (s *Registry) endedHeldLocked(name string, owner uint32) error {
	for _, e := range s.ended {
		if e.Name == name && e.Owner != owner {
			return fmt.Errorf("%w: %s was the name of uid %d's session, which ended and is still listed: choose another name", ErrSessionExists, name, e.Owner)
		}
	}
	return nil
}

// registered runs OnRegister for name, registered at at.
func (s *Registry) registered(name string, at time.Time) {
	if s.OnRegister != nil {
		s.OnRegister(name, at)
	}
}

// OwnerOf returns the owner uid of session name, live or ended and still
// listed, else KeptOwner's answer; false for a name nobody knows.
func (s *Registry) OwnerOf(name string) (uint32, bool) {
	s.mu.Lock()
	if sess, ok := s.byName[name]; ok {
		owner := sess.info.Owner
		s.mu.Unlock()
		return owner, true
	}
	for i := len(s.ended) - 1; i >= 0; i-- {
		if s.ended[i].Name == name {
			owner := s.ended[i].Owner
			s.mu.Unlock()
			return owner, true
		}
	}
	s.mu.Unlock()
	if s.KeptOwner != nil {
		return s.KeptOwner(name)
	}
	return 0, false
}

// Register makes the live process pid the root of a new session name. The
// process is identified by its current start time and watched: the session
// ends when it exits. Errors: ErrInvalidSession (wrapped, with the reason),
// ErrSessionExists (joining an existing session would share its reads),
// ErrProcessGone, ErrProcessBusy (the process's /proc files did not answer
// within procfs.Bound), ErrAlreadyRooted.
func (s *Registry) Register(name string, pid uint32, cmd string) error {
	return s.RegisterFor(s.MountOwner, name, pid, cmd, false)
}

// RegisterAs is Register, marking the root as an agent harness when
// harness is set (Info.Harness, HarnessRoot).
func (s *Registry) RegisterAs(name string, pid uint32, cmd string, harness bool) error {
	return s.RegisterFor(s.MountOwner, name, pid, cmd, harness)
}

// RegisterFor is RegisterAs for a session owned by uid owner
// (Info.Owner). Errors: those of Register, and ErrTooManySessions
// when owner has MaxPerOwner live sessions.
func (s *Registry) RegisterFor(owner uint32, name string, pid uint32, cmd string, harness bool) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSession, err)
	}
	if err := s.checkName(name, owner); err != nil {
		return err
	}
	key, pidfd, err := s.identify(pid)
	if err != nil {
		return err
	}
	pid = key.pid
	cg := s.cgroupOfBounded(pid) // "" when unknown: the root then nests in no cgroup session
	at := time.Now()
	s.mu.Lock()
	if _, ok := s.byName[name]; ok {
		s.mu.Unlock()
		unix.Close(pidfd)
		return fmt.Errorf("%w: %s", ErrSessionExists, name)
	}
	if err := s.endedHeldLocked(name, owner); err != nil {
		s.mu.Unlock()
		unix.Close(pidfd)
		return err
	}
	if other, ok := s.byRoot[key]; ok {
		s.mu.Unlock()
		unix.Close(pidfd)
		return fmt.Errorf("%w: pid %d is the root of %s", ErrAlreadyRooted, pid, other.info.Name)
	}
	if err := s.reserveLocked(owner); err != nil {
		s.mu.Unlock()
		unix.Close(pidfd)
		return err
	}
	sess := &session{info: Info{Name: name, Owner: owner, RootPid: pid, RootStart: key.start, Command: cmd,
		Started: time.Now(), Live: true, Harness: harness}, stop: make(chan struct{})}
	s.byName[name] = sess
	s.byRoot[key] = sess
	s.rootCg[key] = cg
	s.gen++
	s.mu.Unlock()
	s.registered(name, at)
	go s.watchExit(sess, pidfd)
	return nil
}

// identify returns the process of thread pid as (pid, start time) with a
// pidfd open on it (the caller closes it). Errors: ErrProcessGone,
// ErrProcessBusy (its /proc files did not answer within procfs.Bound).
func (s *Registry) identify(pid uint32) (proc, int, error) {
	// pid may be any thread's id (FUSE reports the calling thread, and a
	// multi-threaded caller such as a Go program writes from any of
	// them); the root is its process. pidfd_open of a non-leader thread
	// fails (ENOENT since Linux 6.9).
	pid, err := s.leaderBounded(pid)
	if err != nil {
		if errors.Is(err, procfs.ErrSlow) {
			return proc{}, -1, fmt.Errorf("%w: pid %d: %v", ErrProcessBusy, pid, err)
		}
		return proc{}, -1, fmt.Errorf("%w: pid %d: %v", ErrProcessGone, pid, err)
	}
	// Open the pidfd first, then read the start time: if the pid was
	// recycled in between, the start time read belongs to the process the
	// pidfd refers to.
	pidfd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return proc{}, -1, fmt.Errorf("%w: pid %d: %v", ErrProcessGone, pid, err)
	}
	st, err := s.statBounded(pid)
	if err != nil {
		unix.Close(pidfd)
		if errors.Is(err, procfs.ErrSlow) {
			return proc{}, -1, fmt.Errorf("%w: pid %d: %v", ErrProcessBusy, pid, err)
		}
		return proc{}, -1, fmt.Errorf("%w: pid %d", ErrProcessGone, pid)
	}
	return proc{pid, st.start}, pidfd, nil
}

// watchExit ends sess when its root exits (the pidfd becomes readable).
func (s *Registry) watchExit(sess *session, pidfd int) {
	defer unix.Close(pidfd)
	if pollUntil(sess.stop, pidfd, func(readable bool) bool { return readable }) {
		s.end(sess, true)
	}
}

// pollUntil polls fd for input every 500 ms until done(readable) says so
// (true) or stop is closed (false). done runs after each poll, readable
// telling whether fd had input.
func pollUntil(stop <-chan struct{}, fd int, done func(readable bool) bool) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		select {
		case <-stop:
			return false
		default:
		}
		n, err := unix.Poll(fds, 500)
		if err == unix.EINTR {
			continue
		}
		if done(n > 0) {
			return true
		}
	}
}

// Restore re-registers a session saved before a daemon restart when its
// root process is still alive: same pid and same start time (a recycled pid
// is not the same root). Errors: those of Register, or ErrProcessGone when
// the root is gone or was replaced.
func (s *Registry) Restore(info Info) error {
	if info.RootKind() != "pid" {
		return s.restoreRootless(info) // sessions_cgroup.go
	}
	st, err := s.stat(info.RootPid)
	if err != nil || st.start != info.RootStart {
		return fmt.Errorf("%w: root %d of %s", ErrProcessGone, info.RootPid, info.Name)
	}
	if err := s.RegisterFor(info.Owner, info.Name, info.RootPid, info.Command, info.Harness); err != nil {
		return err
	}
	s.mu.Lock()
	if sess, ok := s.byName[info.Name]; ok && sess.info.RootStart == info.RootStart {
		sess.info.Started = info.Started
	} else if ok {
		s.mu.Unlock()
		s.End(info.Name) // the pid was recycled between the check and the registration
		return fmt.Errorf("%w: root %d of %s", ErrProcessGone, info.RootPid, info.Name)
	}
	s.mu.Unlock()
	return nil
}

// Live returns the live sessions (for saving them).
func (s *Registry) Live() []Info {
	var out []Info
	for _, si := range s.List() {
		if si.Live {
			out = append(out, si)
		}
	}
	return out
}

// End ends the session name now. Errors: ErrNoSession.
func (s *Registry) End(name string) error {
	s.mu.Lock()
	sess, ok := s.byName[name]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoSession, name)
	}
	s.end(sess, false, s.cgroupMembers(sess)...) // sessions_left.go
	return nil
}

// end ends sess; rootGone says its root process has exited. The
// processes it still has, and also, are recorded as having left it
// (leaveLocked).
func (s *Registry) end(sess *session, rootGone bool, also ...proc) {
	defer s.pruneLeft()
	s.mu.Lock()
	if !sess.info.Live {
		s.mu.Unlock()
		return
	}
	for _, k := range also {
		s.noteMemberLocked(sess, k)
	}
	s.leaveLocked(sess, rootGone)
	sess.info.Live = false
	sess.info.Ended = time.Now()
	close(sess.stop)
	delete(s.byName, sess.info.Name)
	s.dropRootsLocked(sess) // sessions_cgroup.go: its pid roots, joined roots and cgroup
	s.ended = append(s.ended, sess.info)
	if max := s.MaxEnded; max > 0 && len(s.ended) > max {
		s.ended = append(s.ended[:0], s.ended[len(s.ended)-max:]...)
	}
	s.gen++
	s.unreserveLocked(sess.info.Owner)
	name := sess.info.Name
	s.mu.Unlock()
	if s.OnEnd != nil {
		s.OnEnd(name)
	}
}

// Rename renames a live session. Errors: ErrInvalidSession, ErrNoSession,
// ErrSessionExists.
func (s *Registry) Rename(from, to string) error {
	if err := ValidName(to); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSession, err)
	}
	owner, ok := s.OwnerOf(from)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoSession, from)
	}
	if err := s.checkName(to, owner); err != nil {
		return err
	}
	at := time.Now()
	s.mu.Lock()
	sess, ok := s.byName[from]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNoSession, from)
	}
	if _, ok := s.byName[to]; ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrSessionExists, to)
	}
	if err := s.endedHeldLocked(to, sess.info.Owner); err != nil {
		s.mu.Unlock()
		return err
	}
	delete(s.byName, from)
	sess.info.Name = to
	s.byName[to] = sess
	s.gen++
	s.mu.Unlock()
	s.registered(to, at)
	return nil
}

// List returns the live sessions by name, then the ended ones kept for
// display, oldest first.
func (s *Registry) List() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.byName)+len(s.ended))
	for _, sess := range s.byName {
		out = append(out, sess.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return append(out, s.ended...)
}

// Lookup returns the live session name.
func (s *Registry) Lookup(name string) (Info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.byName[name]; ok {
		return sess.info, true
	}
	return Info{}, false
}

// HarnessRoot returns the root process of session when the session is
// live and in harness mode (guard.HarnessRoots).
func (s *Registry) HarnessRoot(session string) (ProcKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.byName[session]; ok && sess.info.Harness {
		return ProcKey{sess.info.RootPid, sess.info.RootStart}, true
	}
	return ProcKey{}, false
}
