package journal

// The contract between the journal (which plans) and the mount (which
// applies): after-states, the rewind plan and its applier, the change
// list and the diff. The bodies marked "not implemented" are filled in by
// the rewind engine (afternotes.go, rewind.go, changes.go, diff.go,
// gc.go; dirfs.go is the plain-directory Inspector and Applier).

import (
	"time"
)

// OpAfter is the Op of an after-note: the state a session's change left its
// paths in (Record.After, Record.Ref the Seq of the change, or 0 for a
// handle's close).
const OpAfter = "after"

// OpEnd is the Op of the record that ends a session (its registration
// ended); retention counts from its Time.
const OpEnd = "end"

// OpFailed is the op of a failure note: its Ref names a change record
// whose backing operation then failed (an rmdir of a directory that was
// not empty, a create of a name that existed), so the change never
// happened. Journal.Records marks that record Failed.
const OpFailed = "failed"

// After is the state of one path as observed by Lstat (never following a
// final symlink): Kind (KindAbsent, KindFile, KindDir, KindSymlink), Mode
// (full st_mode), Size (bytes), Ino, MtimeNs (ns since the epoch) and,
// when the caller had it for free, Hash (32 hex digits of xxh3-128, "" when
// unknown). A conflict is a path whose current After differs from the last
// one its session recorded (SameState).
type After struct {
	Path    string `json:"path,omitempty"`
	PID     uint64 `json:"pid,omitempty"` // in the log: docs/DESIGN.md#journal-paths
	Kind    string `json:"kind"`
	Mode    uint32 `json:"mode,omitempty"`
	Size    int64  `json:"size,omitempty"`
	Ino     uint64 `json:"ino,omitempty"`
	MtimeNs int64  `json:"mtime_ns,omitempty"`
	Hash    string `json:"hash,omitempty"`
}

// Inspector reads the current state of workspace paths (relative,
// slash-separated) for planning and listing. Lstat returns KindAbsent for
// a missing path (no error); HashOf returns the 32-hex xxh3-128 of a
// regular file's bytes; Open opens a regular file for reading.
type Inspector interface {
	Lstat(path string) (After, error)
	HashOf(path string) (string, error)
}

// Applier makes the changes of a rewind, each one as the session's own
// journaled change (so the rewind itself can be undone). Paths are
// workspace-relative. Errors are reported per step; the rewind goes on.
type Applier interface {
	// Restore makes path what pre says: a file with pre's bytes (from the
	// blob store) and mode, a directory with pre's mode (created when
	// missing), a symlink to pre.Target, or nothing (KindAbsent: the path
	// is removed; a directory only when empty; a path whose parent is
	// missing is already absent). A path already as pre says should be
	// left alone (UpToDateAt), so an undo of the rewind has nothing to
	// copy back. RestoreAt is the reference.
	Restore(path string, pre PreImage, blobs *Blobs) error
	// Rename renames from to to, replacing to even when its kind differs
	// (an empty directory, or a non-directory; RenameReplacingAt): the
	// undo of a rename.
	Rename(from, to string) error
	// Exchange swaps a and b (RENAME_EXCHANGE; the undo of an exchange).
	Exchange(a, b string) error
}

// Step kinds of a Plan.
const (
	StepRestore  = "restore" // Restore to a file, dir or symlink pre-image
	StepRemove   = "remove"  // Restore to KindAbsent
	StepRename   = "rename"  // Rename(From, Path)
	StepExchange = "exchange"
)

// Step is one change of a rewind plan, in the order it is applied.
type Step struct {
	Kind string   `json:"kind"`
	Path string   `json:"path"`
	From string   `json:"from,omitempty"` // StepRename/StepExchange: the other name
	Pre  PreImage `json:"pre,omitempty"`
}

// Conflict is a path the rewind would change that was changed since by
// someone else: By names the session whose journal shows the change, or is
// "" for a change from outside the mount (or untracked).
type Conflict struct {
	Path   string `json:"path"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason"`
}

// Plan is what a rewind of a session to checkpoint To does: Steps in order,
// the Conflicts skipped (applied anyway with Force), and the paths whose
// state at To cannot be restored (Unrecoverable: too large for the blob
// store, or over the store's budget).
type Plan struct {
	Session       string     `json:"session"`
	To            string     `json:"to"`
	Steps         []Step     `json:"steps"`
	Conflicts     []Conflict `json:"conflicts,omitempty"`
	Unrecoverable []PreImage `json:"unrecoverable,omitempty"`
}

// RewindOptions are a rewind's options: Paths limits it to those paths and
// what is below them (nil: every path); Force applies conflicting steps
// too.
type RewindOptions struct {
	Paths []string
	Force bool
}

// Result counts what an applied rewind did, and the step errors.
type Result struct {
	Checkpoint    string   `json:"checkpoint"` // the automatic checkpoint taken before it (undo point)
	Restored      int      `json:"restored"`
	Removed       int      `json:"removed"`
	Conflicts     int      `json:"conflicts"`
	Unrecoverable int      `json:"unrecoverable"`
	Errors        []string `json:"errors,omitempty"`
}

// PathChange is one line of a change list: the path, the ops that named it
// since the checkpoint, its state then (Before) and now (After, hashed),
// and for a rename target the name it came from (RenamedFrom).
type PathChange struct {
	Path        string   `json:"path"`
	Ops         []string `json:"ops"`
	Before      After    `json:"before"`
	After       After    `json:"after"`
	RenamedFrom string   `json:"renamed_from,omitempty"`
}

// GCOptions bounds the store: Budget (bytes of blobs, 0 unlimited) and
// Retention (how long an ended session's log is kept; 0 forever).
type GCOptions struct {
	Budget    int64
	Retention time.Duration
}

// GCResult says what a GC removed.
type GCResult struct {
	Sessions   int   `json:"sessions"`
	Blobs      int   `json:"blobs"`
	FreedBytes int64 `json:"freed_bytes"`
	StoreBytes int64 `json:"store_bytes"`
	// Lost counts the blobs the kept logs name that are missing or of
	// another size than their records say (an OS crash before the flusher
	// made them durable: docs/DESIGN.md#journal-sync); a rewind reports
	// their paths as unrecoverable.
	Lost int `json:"lost,omitempty"`
}
