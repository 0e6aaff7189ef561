package main

// The checks of `rubinofs doctor` about one workspace: the inotify watches
// its directories take and its state directory's ownership and mode.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/watcher"
)

// dirCountLimit bounds the workspace walk of checkInotify.
const dirCountLimit = 4 << 20

// countDirs counts the directories under root that the watcher would
// watch (it skips watcher.DefaultSkip: .git/objects), stopping past limit.
// Unreadable directories are counted and not entered.
func countDirs(root string, limit int) (n int, truncated bool) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d == nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "." && watcher.DefaultSkip(filepath.ToSlash(rel)) {
			return filepath.SkipDir
		}
		n++
		if n > limit {
			truncated = true
			return filepath.SkipAll
		}
		if err != nil {
			return filepath.SkipDir
		}
		return nil
	})
	return n, truncated
}

// checkInotify: the watcher takes one inotify watch per directory; past
// fs.inotify.max_user_watches (shared by all of the user's programs)
// subtrees go unwatched and get short cache timeouts.
func (e *doctorEnv) checkInotify() finding {
	f := finding{Check: "inotify watches"}
	b, err := os.ReadFile(e.watchesF)
	limit, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil {
		f.Level = levelWarn
		f.Detail = fmt.Sprintf("cannot read the limit from %s: %v", e.watchesF, errors.Join(err, perr))
		f.Fix = "mount /proc, or pass --watch=false (short cache timeouts instead of the watcher)"
		return f
	}
	want := 524288
	if e.workspace == "" {
		f.Level = levelOK
		f.Detail = fmt.Sprintf("fs.inotify.max_user_watches is %d (give WORKSPACE to compare it with the directories to watch)", limit)
		return f
	}
	n, truncated := countDirs(e.workspace, max(limit, 1)+1)
	count := strconv.Itoa(n)
	if truncated {
		count = "over " + strconv.Itoa(n-1)
	}
	for want < 2*n {
		want *= 2
	}
	fix := fmt.Sprintf("sysctl fs.inotify.max_user_watches=%d (keep it: echo fs.inotify.max_user_watches=%d > /etc/sysctl.d/60-rubinofs.conf)", want, want)
	switch {
	case n > limit:
		f.Level = levelFail
		f.Detail = fmt.Sprintf("%s has %s directories to watch, fs.inotify.max_user_watches is %d: the rest go unwatched, so external edits there show only after --short-timeout", e.workspace, count, limit)
		f.Fix = fix
	case n > limit/2:
		f.Level = levelWarn
		f.Detail = fmt.Sprintf("%s has %d directories to watch, over half of fs.inotify.max_user_watches (%d), which every program of %s shares", e.workspace, n, limit, e.userName)
		f.Fix = fix
	default:
		f.Level = levelOK
		f.Detail = fmt.Sprintf("%s has %d directories to watch, fs.inotify.max_user_watches is %d", e.workspace, n, limit)
	}
	return f
}

// checkTimestamps: where every change after a stat gets its own ctime
// (docs/DESIGN.md#fine-ctime) the guard trusts the hash it cached for a
// file's stat; elsewhere the first decision on a file the session has
// just written reads it back. Only with a workspace; a warn, never a
// FAIL: the guard is as strict either way.
func (e *doctorEnv) checkTimestamps() finding {
	f := finding{Check: "timestamps"}
	fine, why := daemon.FineCtime(e.workspace, "")
	f.Detail = e.workspace + ": " + why
	if fine {
		f.Level = levelOK
		f.Detail += ": a decision trusts the hash cached for a file's stat"
		return f
	}
	f.Level = levelWarn
	f.Detail += ": the first decision on a file the session has just written reads it back"
	f.Fix = "keep workspaces on ext4, XFS, btrfs or tmpfs under Linux 6.13 or later, where the daemon can check it (it needs to make an unnamed file in the workspace or its state directory)"
	return f
}

// defaultStateDirFor is defaultStateDir for the checked user: the caller's
// own rule, or root's /var/lib/rubinofs and another user's
// ~/.local/state/rubinofs.
func (e *doctorEnv) defaultStateDirFor(ws string) string {
	if e.self {
		return defaultStateDir(ws)
	}
	base := filepath.Join(e.home, ".local", "state", "rubinofs")
	if e.root() {
		base = "/var/lib/rubinofs"
	}
	return stateDirUnder(base, ws)
}

// checkStateDir: the state directory (logs, read state, transcripts) must
// be the user's own and writable by no one else: whoever can write it can
// plant a read state that loosens the guard. It is made 0700 when missing.
func (e *doctorEnv) checkStateDir() finding {
	f := finding{Check: "state directory"}
	dir := e.stateDir
	if dir == "" && e.workspace != "" {
		dir = e.defaultStateDirFor(e.workspace)
	}
	if dir == "" {
		// No workspace: check the base directory every mount's lives in.
		dir = filepath.Dir(e.defaultStateDirFor("/x"))
	}
	var st syscall.Stat_t
	err := syscall.Stat(dir, &st)
	if errors.Is(err, syscall.ENOENT) {
		anc := dir
		for {
			anc = filepath.Dir(anc)
			if syscall.Stat(anc, &st) == nil || anc == "/" {
				break
			}
		}
		if !e.mayAccess(&st, 3) {
			f.Level = levelFail
			f.Detail = fmt.Sprintf("%s does not exist and %s cannot create it in %s", dir, e.userName, anc)
			f.Fix = fmt.Sprintf("mkdir -p -m 700 %s && chown %s %s, or mount with --state-dir DIR", dir, e.userName, dir)
			return f
		}
		f.Level, f.Detail = levelOK, dir+" will be created (mode 700) at the first mount"
		return f
	}
	if err != nil {
		f.Level, f.Detail, f.Fix = levelFail, fmt.Sprintf("%s: %v", dir, err), "mount with --state-dir DIR"
		return f
	}
	mode := st.Mode & 0o7777
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		f.Level, f.Detail = levelFail, dir+" is not a directory"
		f.Fix = "mount with --state-dir DIR, or move " + dir + " away"
	case int(st.Uid) != e.uid:
		f.Level = levelFail
		f.Detail = fmt.Sprintf("%s is owned by uid %d, not %s: its logs and read state would not be private", dir, st.Uid, e.userName)
		f.Fix = fmt.Sprintf("chown -R %s %s", e.userName, dir)
	case mode&0o022 != 0:
		f.Level = levelFail
		f.Detail = fmt.Sprintf("%s is writable by others (mode %o): anyone could plant a read state that loosens the guard", dir, mode)
		f.Fix = "chmod 700 " + dir
	case mode&0o077 != 0:
		f.Level = levelWarn
		f.Detail = fmt.Sprintf("%s is readable by others (mode %o): its logs and transcripts name your files", dir, mode)
		f.Fix = "chmod 700 " + dir
	default:
		f.Level, f.Detail = levelOK, fmt.Sprintf("%s (mode %o, owned by %s)", dir, mode, e.userName)
	}
	return f
}

// checkStaleState: the state directories under the user's state root whose
// workspace is gone, each with its size and last use; warn when there are
// any, with `rubinofs state prune` as the fix (docs/DESIGN.md#state-retention).
func (e *doctorEnv) checkStaleState() finding {
	f := finding{Check: "stale state", Level: levelOK}
	root := filepath.Dir(e.defaultStateDirFor("/x"))
	infos, err := daemon.ScanStateRoot(root, e.uid, false)
	if err != nil {
		f.Level, f.Detail = levelWarn, fmt.Sprintf("cannot list the state directories: %v", err)
		f.Fix = "chown " + e.userName + " " + root + " && chmod 700 " + root
		return f
	}
	var gone, legacy int
	var total int64
	now := time.Now()
	for _, i := range infos {
		switch i.Kind {
		case daemon.StateGone:
			gone++
		case daemon.StateLegacyGone:
			legacy++
		default:
			continue
		}
		i.Size = daemon.DirSize(i.Dir)
		total += i.Size
		f.Lines = append(f.Lines, fmt.Sprintf("%s (%s, %s): workspace %s", i.Dir, humanBytes(i.Size), age(now, i.LastUse), orUnknown(i.Workspace, i.Kind)))
	}
	if gone+legacy == 0 {
		f.Detail = fmt.Sprintf("%s: %d state directories, none of a vanished workspace", root, len(infos))
		return f
	}
	f.Level = levelWarn
	f.Detail = fmt.Sprintf("%s: %d state directories of vanished workspaces (%s)", root, gone+legacy, humanBytes(total))
	f.Fix = "rubinofs state prune (--dry-run first)"
	if legacy > 0 {
		f.Detail += fmt.Sprintf(", %d of them made before rubinofs recorded workspaces", legacy)
		f.Fix = "rubinofs state prune --legacy (--dry-run first)"
	}
	return f
}

// orUnknown is ws, or for a legacy state directory without a guess what
// is known.
func orUnknown(ws, kind string) string {
	if ws == "" {
		return "unknown (no record, no directory of its name)"
	}
	if kind == daemon.StateLegacyGone {
		return ws + " (from its log; gone)"
	}
	return ws + " (gone)"
}
