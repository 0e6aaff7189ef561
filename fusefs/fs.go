// Package fusefs is the go-fuse adapter of rubinofs: a pass-through file
// system over the workspace directory whose nodes (Node, embedding
// go-fuse's fs.Inode, as gocryptfs does) reach every backing file relative
// to one root descriptor and ask the guard before every mutation of an
// existing file (docs/DESIGN.md#mutation-path), plus the control tree
// /.rubino rendered from package ctltree. Open files are go-fuse's
// fs.LoopbackFile handles, wrapped (File) where the guard applies.
//
// The adapter never decides: package guard does. fusefs only maps FUSE
// operations to guard ops, serialises check and mutation per file identity
// (guard.Lock), registers reads and credits own writes.
//
// Layout follows gocryptfs' internal/fusefrontend: node.go (the node type and
// lookups), node_open_create.go, node_dir_ops.go, node_attr.go, mutation.go
// (the guarded mutation path), loopback.go and backing.go (the backing
// calls), file.go (the file handle), ctl.go (the generic control-file
// mechanism), control.go (the base control files) and node_api_check.go
// (interface assertions).
package fusefs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/internal/crossmount"
	"github.com/rubinofs/rubinofs/internal/ctlfs"
	"github.com/rubinofs/rubinofs/internal/ctlhost"
	"github.com/rubinofs/rubinofs/internal/invalidate"
	"github.com/rubinofs/rubinofs/internal/journalhook"
	"github.com/rubinofs/rubinofs/internal/sessionctl"
	"github.com/rubinofs/rubinofs/internal/syscallcompat"
	"github.com/rubinofs/rubinofs/journal"
	"github.com/rubinofs/rubinofs/sessions"
)

// Resolver maps a caller's pid to its guard session name. It must be safe for
// concurrent use and cheap: it runs on every guarded FUSE request. It must
// never wait on the caller's state (docs/DESIGN.md#no-wait-on-caller):
// when it cannot tell in time it answers sessions.Unknown.
type Resolver interface {
	Resolve(pid uint32) sessions.Session
}

// Exempter reports whether a workspace-relative path (slash-separated, no
// leading slash) is exempt from the guard (.git/, ignored files, --exempt).
// guard/ignore.Matcher implements it. Invalidate is called with the
// directory of a .gitignore that changed through the mount.
type Exempter interface {
	Exempt(rel string, isDir bool) bool
	Invalidate(relDir string)
}

// Config configures a FS. Zero values are usable for every field but
// Workspace and Guard.
type Config struct {
	// Workspace is the backing directory as given by the user (shown in
	// status and used as FsName).
	Workspace string
	// BackingPath is how the daemon reaches the backing directory. It is
	// Workspace normally, and /proc/self/fd/N for an in-place mount, where
	// the workspace path is covered by the mount itself.
	BackingPath string
	// Guard decides every guarded mutation. Required.
	Guard *guard.Guard
	// Exempt selects paths the guard does not apply to; nil guards all.
	Exempt Exempter
	// Policy, when set, holds the ignore rules the mount's owner accepted
	// (docs/DESIGN.md#exempt-widening), shared by the matchers of Exempt
	// and JournalExempt: the FS pins a rule file before changing it,
	// reports renamed directories, and serves .rubino/policy. nil: every
	// rule on disk counts at once.
	Policy *ignore.Policy
	// Tools, when set, exempts from refusals the files of tool-owned
	// trees (a venv, node_modules, a tagged cache) that the caller's uid
	// may change without reading (docs/DESIGN.md#tool-trees). It is asked
	// only when the guard would refuse. nil: none.
	Tools *ignore.Tools
	// Sessions resolves caller pids to sessions; nil puts everyone in
	// their uid's default session. When it is also a
	// sessionctl.OwnerRegistry, it says whose a registered session is
	// (sessionctl.Owners.MayActOn). Set it here: it is read from New on.
	Sessions Resolver
	// AllowUnregistered leaves callers of sessions.Default unguarded
	// (--unregistered allow).
	AllowUnregistered bool
	// Version is shown in .rubino/status.
	Version string
	// Owner is the uid that owns the mount; it and root are Privileged
	// callers of the control tree.
	Owner uint32
	// Logger receives diagnostics as levelled, structured records (nil:
	// text records to stderr): a shadowed .rubino and a read or write that
	// could not be registered at level warn, subtrees skipped by
	// configuration at info, lost watcher events at warn (at most one
	// record a minute, with the count: internal/invalidate). go-fuse's own messages
	// go through a *log.Logger bridged to it (see Mount).
	Logger *slog.Logger
	// Passthrough allows kernel passthrough; a read-only handle of a file
	// under PagedReadMax bytes keeps kept pages instead (FS.pagedRead).
	Passthrough  bool
	PagedReadMax int64
	// Observe is the observability room (internal/observe: per-op
	// metrics, access log, .rubino/metrics and .rubino/accesslog), the
	// one hook the FS holds into it (docs/DESIGN.md#observe-room). nil:
	// none of it.
	Observe Observer
	// Shared: other mounts (other hosts) share the backing directory
	// (docs/DESIGN.md#close-to-open): a guarded read-only handle is served
	// by the daemon with direct I/O, never by passthrough or the page
	// cache, and registers exactly the bytes of its first READ, under the
	// cross-mount lock. Without it, the mount is shared from the first
	// decision that finds a peer through Peers (crossmount.Mode.Shared).
	Shared bool
	// Uncached: the backing filesystem's clients cache what other hosts
	// change (a network or FUSE filesystem: GlusterFS, NFS, CephFS,
	// JuiceFS), so its stat and page cache are no view to decide on
	// (docs/DESIGN.md#uncached-view): backing regular files are opened
	// with O_DIRECT (falling back without it where refused), and the
	// guard must not reuse hashes by stat (guard.Config.UntrustedStat).
	// It implies Shared.
	Uncached bool
	// Peers, when set, finds other mounts of the backing directory on this
	// host (docs/DESIGN.md#peer-mounts): the mount turns shared, as with
	// Shared, at the first decision that sees one, and stays shared. nil:
	// only Shared decides.
	Peers crossmount.PeerProbe
	// Journal, when set, records every change a session makes through
	// the mount, with its pre-images, before the change is made
	// (docs/DESIGN.md#journal-hook); nil: no journal call at all.
	Journal *journal.Journal
	// JournalExempt selects the paths not journaled besides .git/ and the
	// control tree: git-ignored paths (a guard/ignore matcher without
	// extra globs); nil journals every other path (--journal-ignored).
	JournalExempt Exempter
}

// FS is one rubinofs file system: the root node, the guard and the
// control tree. Its methods are safe for concurrent use.
type FS struct {
	cfg     Config
	root    *Node
	ctl     *ctlfs.Tree
	started time.Time
	log     *slog.Logger
	// cross is the mount's state towards other mounts of the backing
	// directory: shared mode, the cross-mount lock, own-change stats, the
	// uncached view (internal/crossmount).
	cross *crossmount.Mode

	// mountpoint is where the mount is (Mount sets it), for resolving the
	// paths callers write to control files (CtlHost.CallerRel).
	mountpoint ctlhost.Mountpoint
	// owners is the session ownership: each uid's default session and
	// who may act on a session (docs/DESIGN.md#sessions).
	owners *sessionctl.Owners

	// server is set once mounted; used for kernel notifications from the
	// invalidation goroutine only.
	server atomic.Pointer[fuse.Server]

	// names orders operations by node after name changes (names.go).
	names nameChanges
	// unpins closes the pins of removed and replaced files after the
	// reply (lateclose.go).
	unpins lateCloser

	// moveMu orders the renames and links whose checks read the tree
	// below and the names above them, so that none changes those between
	// another's check and its change: written by those that move a
	// directory or a name into another directory, read by those within
	// one directory (moveSerial, exemptname.go).
	moveMu sync.RWMutex

	// flux counts changes the kernel may not have applied yet (flux.go).
	flux fluxCounts

	// errs is /.rubino/errors, shared with the control tree
	// (ctlfs.Config.Errors).
	errs ctltree.ErrorRing

	counters fsCounters

	// bk is the backing root every backing access starts from
	// (backing.go).
	bk backing

	shadowed  bool // a real .rubino exists in the workspace
	keepCache bool // keep the page cache across opens (watcher attached)
	// guardMode is cfg.Guard.Mode(), fixed for the guard's life
	// (policyOf).
	guardMode guard.Mode

	// inv applies external changes (nil without a watcher); shortTimeout
	// is the cache timeout of subtrees it cannot vouch for.
	inv          *invalidate.Invalidation
	shortTimeout time.Duration
	// served is closed once the mount has its server (SetServer, after
	// the bridge and its Init): the invalidator notifies the kernel only
	// after it, since every notification reads the server Init wrote.
	served     chan struct{}
	servedOnce sync.Once
	ended      chan struct{} // closed once go-fuse's Serve has returned (serve)

	// handles is every open handle with a backing descriptor, closed by
	// Close when their RELEASE never came (handles.go).
	handles fsHandles

	// fds bounds the handles each uid, and all, hold open (fdbudget.go).
	fds *fdBudget

	// released holds, by RELEASE request, what is left to do once go-fuse
	// has served it (releases.afterRelease, iomode.go).
	released releases

	// oc brackets the daemon's own changes (ownChanges).
	oc ownChanges

	// jh is the journal's hook (internal/journalhook; nil: the journal
	// is off, and no journal code runs beyond a nil check).
	jh *journalhook.Hook
}

// fsCounters counts opens, creates, refusals and warnings for
// .rubino/status and the metrics. Concurrency: atomics.
type fsCounters struct {
	opens, creates, denials, warned atomic.Uint64
}

// decided counts the warned allowed ops of a decision and a refusal.
func (c *fsCounters) decided(warned int, denied bool) {
	c.warned.Add(uint64(warned))
	if denied {
		c.denials.Add(1)
	}
}

// StatusFunc contributes one top-level key to .rubino/status. It must be
// cheap and safe for concurrent use.
type StatusFunc = ctlfs.StatusFunc

// New builds a FS over cfg.Workspace. It fails when the workspace is not a
// directory or Guard is nil.
func New(cfg Config) (*FS, error) {
	if cfg.Guard == nil {
		return nil, fmt.Errorf("fusefs: no guard configured")
	}
	if cfg.BackingPath == "" {
		cfg.BackingPath = cfg.Workspace
	}
	if cfg.Uncached {
		cfg.Shared = true // its read handles are served by readShared
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if cfg.Observe == nil {
		cfg.Observe = noObserver{} // observer.go
	}
	var st syscall.Stat_t
	if err := syscall.Stat(cfg.BackingPath, &st); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("workspace %s: not a directory", cfg.Workspace)
	}
	f := &FS{
		cfg:     cfg,
		started: time.Now(),
		log:     cfg.Logger,
		served:  make(chan struct{}),
		ended:   make(chan struct{}),
		fds:     newFdBudget(fdLimit()),
		cross: crossmount.New(crossmount.Config{Shared: cfg.Shared, Uncached: cfg.Uncached, Peers: cfg.Peers,
			Workspace: cfg.Workspace, Guard: cfg.Guard, Logger: cfg.Logger}),
	}
	ownerReg, _ := cfg.Sessions.(sessionctl.OwnerRegistry)
	f.owners = sessionctl.NewOwners(cfg.Owner, ownerReg)
	if cfg.Guard != nil {
		f.guardMode = cfg.Guard.Mode()
	}
	rootFd, err := openRoot(cfg.BackingPath)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	f.bk.rootFd.Store(int64(rootFd))
	f.bk.rootDev, f.bk.cross = uint64(st.Dev), f.cross
	f.root = &Node{fs: f}
	f.oc = ownChanges{f: f, crossOwn: f.cross.OwnTracked()}
	var ctlSt syscall.Stat_t
	if f.bk.lstatRel(ctltree.DirName, &ctlSt) == 0 {
		f.shadowed = true
		f.log.Warn("the workspace has its own "+ctltree.DirName+"; the control tree shadows it",
			"path", filepath.Join(cfg.Workspace, ctltree.DirName))
	}
	f.ctl = newCtlTree(f) // ctl_host.go
	f.jh = journalhook.New(journalhook.Config{Journal: cfg.Journal, Exempt: cfg.JournalExempt,
		Mount: journalMount{f}, Guard: cfg.Guard, Logger: f.log, Report: f.errs.Add})
	if f.jh != nil {
		f.AddStatus(f.jh.Status)
	}
	for _, st := range f.cross.Status() { // shared, uncached, cross_mount
		f.AddStatus(st)
	}
	f.AddStatus(f.fds.status)
	return f, nil
}

// Root returns the root node, for fs.Mount or fs.NewNodeFS.
func (f *FS) Root() fs.InodeEmbedder { return f.root }

// Guard returns the guard this FS consults.
func (f *FS) Guard() *guard.Guard { return f.cfg.Guard }

// Shadowed reports whether a real .rubino in the workspace is hidden by the
// control tree.
func (f *FS) Shadowed() bool { return f.shadowed }

// SetServer records the mounted server, for kernel notifications, and
// lets the invalidator start (FS.served).
func (f *FS) SetServer(s *fuse.Server) {
	f.server.Store(s)
	f.servedOnce.Do(func() { close(f.served) })
}

// Ended is closed once go-fuse has closed the mount's /dev/fuse descriptor
// and run OnUnmount, after fuse.Server.Wait returns.
func (f *FS) Ended() <-chan struct{} { return f.ended }

// caller describes who issued a FUSE request.
type caller struct {
	pid      uint32
	uid, gid uint32
	session  string
}

// callerOf resolves the request's caller. A caller under no registered
// session root gets its own uid's default session (sessionctl.Owners.Default:
// sessions.Default for the mount's owner, "default-U" for uid U); the uid
// comes from the request header, so this costs no /proc read
// (docs/DESIGN.md#sessions). RELEASE and some other requests arrive with
// pid 0; they resolve to that default session and must not be used for
// attribution (the handle keeps the session seen at open). Requests on an
// open handle (READ, WRITE, FLUSH, FSYNC, RELEASE, ftruncate) never call it:
// they use the handle's session. The resolver never waits longer than
// procfs.Bound; a caller it could not resolve by then has session
// sessions.Unknown, which is guarded (even with AllowUnregistered), is
// refused every guarded mutation with EAGAIN and credits no read
// (docs/DESIGN.md#no-wait-on-caller).
func (f *FS) callerOf(ctx context.Context) caller {
	c := caller{session: sessions.Default}
	if fc, ok := fuse.FromContext(ctx); ok {
		c.pid, c.uid, c.gid = fc.Pid, fc.Uid, fc.Gid
	}
	if c.pid != 0 && f.cfg.Sessions != nil {
		c.session = string(f.cfg.Sessions.Resolve(c.pid))
	}
	if c.session == sessions.Default {
		// Outside every session: the caller's own uid's default session,
		// never another uid's (docs/DESIGN.md#sessions).
		c.session = f.owners.Default(c.uid)
	}
	return c
}

// guarded reports whether the guard applies to this caller at all.
func (f *FS) guarded(c caller) bool {
	if f.guardMode == guard.ModeOff {
		return false
	}
	return !(f.cfg.AllowUnregistered && f.owners.IsDefault(c.session))
}

// exempt reports whether rel is exempt from the guard.
func (f *FS) exempt(rel string, isDir bool) bool {
	if f.cfg.Exempt == nil {
		return false
	}
	return f.cfg.Exempt.Exempt(rel, isDir)
}

// backing returns the absolute backing path of a workspace-relative path.
// Only the watcher uses it (it watches, it serves no request); every
// backing access of a request goes through prepareAt (backing.go).
func (f *FS) backing(rel string) string {
	return filepath.Join(f.cfg.BackingPath, rel)
}

// target builds the guard's view of the backing file at rel from its stat.
func (f *FS) target(rel string, st *syscall.Stat_t) guard.Target {
	return guard.Target{
		Path: rel,
		Stat: guard.StatOf(st),
		Open: func() (*os.File, error) {
			return f.bk.openForHashAt(rel)
		},
	}
}

// LookupTarget stats the workspace-relative path rel in the backing
// directory (beneath the root, following no symlink on the way or at the
// end) and returns its guard target, for guard.Tracked and guard.Load.
// Errors: a syscall.Errno, those of openat2 and statx (ELOOP for a
// symlink on the way).
func (f *FS) LookupTarget(rel string) (guard.Target, error) {
	var st syscall.Stat_t
	if errno := f.bk.lstatRel(rel, &st); errno != 0 {
		return guard.Target{}, errno
	}
	return f.target(rel, &st), nil
}

// fdTarget builds a target whose content is read through an open fd (so a
// renamed or unlinked file is still hashed correctly).
func fdTarget(rel string, fd int) (guard.Target, error) {
	var st syscall.Stat_t
	stat := syscall.Fstat
	if syscallcompat.FdDirect(fd) != 0 {
		stat = syscallcompat.FstatSync // an uncached backing's read handle: the server's stat (docs/DESIGN.md#uncached-view)
	}
	if err := stat(fd, &st); err != nil {
		return guard.Target{}, err
	}
	return fdTargetOf(rel, fd, &st), nil
}

// fdTargetOf is fdTarget with st, fd's stat, taken by the caller.
func fdTargetOf(rel string, fd int, st *syscall.Stat_t) guard.Target {
	return guard.Target{
		Path: rel,
		Stat: guard.StatOf(st),
		Open: fdOpener(fd), // ownattr.go
	}
}

// decide asks the guard about op on target for caller c outside the
// mutation pipeline (a mapping's page-in, a passthrough read-write open):
// guard.Guard.Check, which records a denial (or a warning), counted for
// the metrics. It returns the errno to give the caller: 0, the guard's
// configured errno (EACCES by default), or EAGAIN for
// sessions.Unknown.
func (f *FS) decide(c caller, op guard.Op, t guard.Target) syscall.Errno {
	errno, warned := f.cfg.Guard.Check(c.asker(f), op, t)
	n := 0
	if warned {
		n = 1
	}
	f.counters.decided(n, errno != 0)
	return errno
}

// asker describes c to f's guard for a decision (guard.Asker): its
// guardCaller, uid, pid, and the tool trees (Config.Tools).
func (c caller) asker(f *FS) guard.Asker {
	return guard.Asker{Caller: c.guardCaller(f), Uid: c.uid, Pid: c.pid, Tools: f.cfg.Tools}
}

// guardCaller describes c to the guard: its session, and its process facts
// (sessions.ReadFacts) and comm, each read from /proc at most once and only
// when the guard asks, bounded by procfs.Bound. Not safe for concurrent
// use: one request's goroutine uses it.
func (c caller) guardCaller(f *FS) guard.Caller {
	var facts sessions.ProcFacts
	var name string
	haveFacts, haveName := false, false
	return guard.Caller{
		Session: c.session,
		Facts: func() sessions.ProcFacts {
			if !haveFacts {
				facts, haveFacts = sessions.ReadFacts(c.pid), true
			}
			return facts
		},
		Comm: func() string {
			if !haveName {
				name, haveName = sessions.Comm(c.pid), true
			}
			return name
		},
		// A refusal names the session that replaced the file only for a
		// caller that may see it (docs/DESIGN.md#stale-replaced): every
		// reader of this session's denials may then see it too.
		MayName: func(other string) bool { return f.owners.MayActOn(ctlCaller(f.cfg.Owner, c), other) },
	}
}

// ownChanges is what the daemon's own changes owe the others: the
// watcher's brackets begin and move (the invalidator's trackers, taken
// once by Mount; nil: no watcher), the pinned and reloaded ignore rules,
// the deferred hashes settled before a change sets a ctime (ownattr.go),
// the stat left for the cross-mount lock when crossOwn
// (crossmount.Mode.OwnTracked, read in New). Safe for concurrent use.
type ownChanges struct {
	f        *FS
	crossOwn bool
	begin    func(rels ...string) (end func())
	move     func(from, to string) (end func(moved bool))
}

// ownChange brackets a change the daemon is about to make to rels: it
// tells the watcher (when attached) so the change's fsnotify events are not
// taken for external edits. The returned end must be called once the change
// is done, successful or not; it also reloads the ignore rules when a
// .gitignore changed.
func (o ownChanges) ownChange(rels ...string) (end func()) {
	rules := o.pinRules(rels)
	endOwn := func() {}
	if o.begin != nil { // the watcher's Begin
		// One bracket for all names: a file moving between them is
		// recorded where it ends up (watcher.Watcher.Begin).
		endOwn = o.begin(rels...)
	}
	return func() {
		endOwn()
		o.invalidateRules(rules)
	}
}

// pinRules pins, before the FS changes them, the rule files among rels
// that git reads (docs/DESIGN.md#exempt-widening), and returns them (nil
// for none: ignore.IsRuleFile is asked once per name and change): what
// each held stays accepted, what the change writes waits for the owner. A
// .gitignore in an exempt directory is skipped: its rules count for
// nothing while the directory is exempt, and a package install writes
// thousands of them.
func (o ownChanges) pinRules(rels []string) (rules []string) {
	f := o.f
	for _, rel := range rels {
		if !ignore.IsRuleFile(rel) {
			continue
		}
		rules = append(rules, rel)
		if dir := path.Dir(rel); f.cfg.Policy != nil && (rel == ".git/info/exclude" || dir == "." || !f.exempt(dir, true)) {
			f.cfg.Policy.Pin(rel)
		}
	}
	return rules
}

// invalidateRules reloads the ignore rules of rules (ruleFiles) in both matchers.
func (o ownChanges) invalidateRules(rules []string) {
	f := o.f
	for _, rel := range rules {
		for _, m := range []Exempter{f.cfg.Exempt, f.cfg.JournalExempt} {
			if m != nil {
				m.Invalidate(path.Dir(rel))
			}
		}
	}
}
