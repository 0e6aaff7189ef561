package daemon

// The watcher's wiring: the invalidation feed, the ignore rules its
// events reload, and the hash cache's timestamp granularity of the
// backing filesystem.

import (
	"fmt"
	"path"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/fusefs"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/watcher"
)

// timestampGranularity returns the timestamp granularity the hash cache's
// racy rule assumes for the backing filesystem: 10 ms (a coarse-clock tick
// at HZ=100, the worst case) for local filesystems with nanosecond
// timestamps, 2 s for anything else (FAT's resolution; network filesystems
// whose server clock rounds).
func timestampGranularity(backing string) time.Duration {
	var st syscall.Statfs_t
	if err := syscall.Statfs(backing, &st); err != nil {
		return 2 * time.Second
	}
	switch uint32(st.Type) {
	case 0xEF53, // ext2/3/4
		0x58465342, // xfs
		0x9123683E, // btrfs
		0x01021994, // tmpfs
		0x794c7630, // overlayfs
		0xF2F52010, // f2fs
		0x2FC12FC1: // zfs
		return 10 * time.Millisecond
	}
	return 2 * time.Second
}

// startWatcher attaches the invalidation feed to the FS and starts the
// watcher over the backing directory.
func (d *Daemon) startWatcher(backing string, matcher, jmatcher *ignore.Matcher) error {
	cfg := d.cfg
	skip, err := watchSkip(&cfg) // watchmode.go
	if err != nil {
		return err
	}
	inv := d.FS.AttachWatcher(fusefs.WatchOptions{ShortTimeout: cfg.ShortTimeout})
	w, err := watcher.Start(watcher.Config{
		Root:       backing,
		Skip:       skip,
		MaxWatches: cfg.MaxWatches,
		OnEvents: func(evs []watcher.Event) {
			d.acceptExternal(matcher, evs) // policy.go
			invalidateIgnores(matcher, evs)
			if jmatcher != nil && jmatcher != matcher { // the guard's own when they answer alike (openJournal)
				invalidateIgnores(jmatcher, evs)
			}
			inv.Events(evs)
		},
		OnOverflow: func() {
			matcher.Invalidate("")
			if jmatcher != nil && jmatcher != matcher {
				jmatcher.Invalidate("")
			}
			inv.Overflow()
		},
		OnUnwatched: inv.Unwatched,
		OnProgress:  cfg.WatchProgress,
		Logger:      cfg.Slog,
	})
	if err != nil {
		inv.Close()
		return fmt.Errorf("watcher: %w", err)
	}
	inv.SetOwnTracker(w.Begin)
	inv.SetMoveTracker(w.BeginMove)
	d.FS.AddStatus(func() (string, any) {
		st, ws := inv.Stats(), w.Stats()
		st["watches"], st["events"], st["external_events"] = ws.Watches, ws.Events, ws.External
		st["own_events"], st["batches"], st["overflows"], st["unwatched"] = ws.Own, ws.Batches, ws.Overflows, ws.Unwatched
		st["own_records_bytes"], st["own_records_dropped"] = ws.OwnBytes, ws.OwnDropped
		return "watcher", st
	})
	d.Watcher, d.Invalidation = w, inv
	return nil
}

// invalidateIgnores reloads the ignore rules of directories whose
// .gitignore changed outside the mount.
func invalidateIgnores(m *ignore.Matcher, evs []watcher.Event) {
	for _, ev := range evs {
		if path.Base(ev.Path) == ".gitignore" {
			m.Invalidate(path.Dir(ev.Path))
		} else if ev.Path == ".git/info/exclude" {
			m.Invalidate(".git/info")
		}
	}
}

func (d *Daemon) stopWatcher() {
	if d.Watcher != nil {
		d.Watcher.Close()
		d.Invalidation.Close()
	}
}
