// Package ctlfs is the control tree's room (docs/DESIGN.md#ctl-room): it
// renders a ctltree.Dir over FUSE (go-fuse nodes and handles, the paged
// and streamed reads), keeps the base files of /.rubino (README, status,
// errors, guard/, policy) and is the one door features come in by
// (Tree.Plug). It asks the mount for what it needs through Host, which
// package fusefs implements; it never imports fusefs.
package ctlfs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/internal/ctlhost"
)

// Host is the mount as the renderer and the base files see it: what a
// feature may ask (ctlhost.Host) and what only the renderer needs. Every
// method is safe for concurrent use and never waits on the calling
// process (docs/DESIGN.md#no-wait-on-caller).
type Host interface {
	ctlhost.Host
	// Caller is the caller of the FUSE request ctx carries, with its
	// session resolved (docs/DESIGN.md#sessions); Privileged is root or
	// the mount's owner.
	Caller(ctx context.Context) ctltree.Caller
	// Admin reports whether c may administer every session: the mount's
	// owner or root, from outside every session.
	Admin(c ctltree.Caller) bool
	// Tracked returns session's read records for reader c, sorted by
	// path, with the hash of each file c could not read itself replaced
	// by "-" (docs/DESIGN.md#as-caller).
	Tracked(c ctltree.Caller, session string) []guard.TrackedRecord
	// Quiet marks the request ctx carries as one the raw-request wrapper
	// neither times nor logs (a stream read that waits for data).
	Quiet(ctx context.Context)
}

// Config is what the renderer and the base files are built from.
type Config struct {
	// Guard is the mount's guard: its mode and counts (status), denials
	// (guard/denials, guard/why) and read records (guard/tracked).
	Guard *guard.Guard
	// Policy, when set, adds .rubino/policy and the "policy" key of
	// status (docs/DESIGN.md#exempt-widening); nil: neither.
	Policy *ignore.Policy
	// Owner is the mount's owner uid: it owns every control node, and it
	// and root are Privileged callers.
	Owner uint32
	// Version and Workspace are shown in status; AllowUnregistered is
	// status's "unregistered" ("allow" or "guard"); Shadowed adds
	// "shadowed_rubino": true (a real .rubino in the workspace).
	Version, Workspace string
	AllowUnregistered  bool
	Shadowed           bool
	// Started is the mount's start: every control node's times, and
	// status's started and uptime_s.
	Started time.Time
	// Logger receives the policy reloads at level info (nil: discarded).
	Logger *slog.Logger
	// Errors is /.rubino/errors, shared with the mount, which records
	// its own failures there too (nil: the tree's own ring).
	Errors *ctltree.ErrorRing
	// Observed are the observability room's files (.rubino/metrics and
	// .rubino/accesslog, docs/DESIGN.md#observe-room), listed after
	// errors in this order (nil: absent).
	Observed []ctltree.Entry
}

// StatusFunc contributes one top-level key to .rubino/status. It must be
// cheap and safe for concurrent use.
type StatusFunc func() (key string, value any)

// Tree is the control tree of one mount: its root directory, the plugged
// features and the status contributors. Plug and AddStatus are called
// before mounting; everything else is safe for concurrent use.
type Tree struct {
	cfg  Config
	host Host
	root *ctltree.Dir
	errs *ctltree.ErrorRing
	// sessionFeats are the plugged features with files in every
	// session's directory, in plugging order (Plug).
	sessionFeats []ctltree.SessionFeature

	statusMu    sync.Mutex
	statusExtra []StatusFunc

	// renders bounds the rendered control files each uid reads at once
	// (pager.go); snaps the snapshots its open handles hold (uidquota.go).
	renders uidQuota
	snaps   uidQuota
}

// New builds the control tree's base files (base.go, policy.go) over
// host. Features come in afterwards through Plug.
func New(cfg Config, host Host) *Tree {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Tree{cfg: cfg, host: host, errs: cfg.Errors}
	if t.errs == nil {
		t.errs = new(ctltree.ErrorRing)
	}
	t.root = t.baseTree()
	if cfg.Policy != nil {
		t.add(t.policyEntry()) // policy.go
		t.AddStatus(t.policyStatus)
	}
	return t
}

// add adds an entry to the control tree root; call it before mounting.
func (t *Tree) add(e ctltree.Entry) {
	t.root.Entries = append(t.root.Entries, e)
}

// Plug adds a feature to the control tree, the one way features register
// (sessions, journal, agents, compaction; docs/DESIGN.md#ctl-room): its
// entries go under /.rubino in order, a feature that is also a
// ctltree.StatusSource contributes its key to .rubino/status, and one that
// is a ctltree.SessionFeature adds its files to every session's directory
// and its verbs to sessions/NAME/ctl (SessionFeatures). Call it before
// mounting; it is not safe to call concurrently with requests.
func (t *Tree) Plug(feat ctltree.Feature) {
	for _, e := range feat.CtlEntries() {
		t.add(e)
	}
	if sf, ok := feat.(ctltree.SessionFeature); ok {
		t.sessionFeats = append(t.sessionFeats, sf)
	}
	if src, ok := feat.(ctltree.StatusSource); ok {
		t.AddStatus(src.Status)
	}
}

// SessionFeatures are the plugged ctltree.SessionFeatures in plugging
// order, for the sessions feature to ask (docs/DESIGN.md#ctl-room). The
// slice is shared: do not modify it.
func (t *Tree) SessionFeatures() []ctltree.SessionFeature { return t.sessionFeats }

// AddStatus registers a contributor to .rubino/status (the watcher, the
// journal, the task registry, ...). Safe for concurrent use.
func (t *Tree) AddStatus(fn StatusFunc) {
	t.statusMu.Lock()
	t.statusExtra = append(t.statusExtra, fn)
	t.statusMu.Unlock()
}

// Errors is /.rubino/errors (Config.Errors or the tree's own ring).
func (t *Tree) Errors() *ctltree.ErrorRing { return t.errs }

// LookupRoot returns the inode of the control tree's root, ctltree.DirName,
// under parent (the mount root), filling out with its attributes and the
// control tree's cache timeouts (docs/DESIGN.md#control-tree-visibility).
func (t *Tree) LookupRoot(ctx context.Context, parent *fs.Inode, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return t.child(ctx, parent, nil, ctltree.DirName, t.root, out)
}

// readme is .rubino/README with its bounds filled in.
func (t *Tree) readme() string {
	return fmt.Sprintf(controlReadme, ctltree.MaxErrors, t.cfg.Guard.DenialLogStats().MaxLines, guard.MaxSummaryKeys)
}

var _ ctlhost.Room = (*Tree)(nil)
