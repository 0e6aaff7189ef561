package daemon

// How the daemon sees external changes: --watch=auto|inotify|poll|off
// (docs/multihost.md).

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/fusefs"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/watcher"
)

// Watch modes, resolved from Config.Watch and Config.WatchMode.
const (
	watchOff     = "off"
	watchInotify = "inotify"
	watchPoll    = "poll"
)

// remoteMagics are statfs f_type values of backing filesystems whose
// changes made on other hosts (or through another mount) inotify never
// reports: network, cluster and FUSE-based filesystems.
var remoteMagics = map[int64]string{
	0x6969:     "nfs",
	0x00c36400: "ceph",
	0x65735546: "fuse", // JuiceFS, GlusterFS native, sshfs, rclone, s3fs, ...
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x517b:     "smb",
	0x01021997: "9p",
	0x5346414f: "afs",
	0x6b414653: "afs",
	0x0bd00bd0: "lustre",
	0x01161970: "gfs2",
	0x7461636f: "ocfs2",
	0x013111a8: "ibrix",
}

// backingKind names the filesystem holding dir when it is one whose remote
// changes inotify does not see ("" for a local one, or when statfs fails).
// A FUSE filesystem is named by its mount's type when /proc/self/mountinfo
// gives it ("fuse.glusterfs", "fuse.juicefs"), else "fuse".
func backingKind(dir string) string {
	var s unix.Statfs_t
	if unix.Statfs(dir, &s) != nil {
		return ""
	}
	kind := remoteMagics[int64(s.Type)&0xffffffff]
	if kind == "fuse" {
		if t := mountType(dir); strings.HasPrefix(t, "fuse.") {
			kind = t
		}
	}
	return kind
}

// mountType returns the filesystem type (mountinfo's field after the
// separator) of the mount whose mount point is the longest prefix of
// dir's real path (the topmost of those), or "" when it cannot be read.
func mountType(dir string) string {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return ""
	}
	best, typ := -1, ""
	for _, m := range ms {
		mp := m.Mountpoint
		if (real == mp || mp == "/" || strings.HasPrefix(real, mp+"/")) && len(mp) >= best {
			best, typ = len(mp), m.FSType
		}
	}
	return typ
}

// watchMode resolves how external changes of backing are seen: off
// without Config.Watch; WatchMode inotify or poll as given; auto (or
// empty) polls on a remote backing (backingKind) and uses inotify
// elsewhere. kind is backingKind's answer.
func watchMode(cfg *Config, backing string) (mode, kind string) {
	kind = backingKind(backing)
	switch {
	case !cfg.Watch:
		return watchOff, kind
	case cfg.WatchMode == watchInotify || cfg.WatchMode == watchPoll:
		return cfg.WatchMode, kind
	case kind != "":
		return watchPoll, kind
	}
	return watchInotify, kind
}

// watchSkip returns the Skip function of the watcher and the poller:
// Config.WatchSkip's globs, or watcher.DefaultSkip. Errors: a malformed
// glob.
func watchSkip(cfg *Config) (func(rel string) bool, error) {
	if len(cfg.WatchSkip) == 0 {
		return watcher.DefaultSkip, nil
	}
	for _, g := range cfg.WatchSkip {
		if !doublestar.ValidatePattern(g) {
			return nil, fmt.Errorf("malformed --watch-skip glob %q", g)
		}
	}
	return func(rel string) bool {
		for _, g := range cfg.WatchSkip {
			if ok, _ := doublestar.Match(g, rel); ok {
				return true
			}
		}
		return false
	}, nil
}

// startPoller attaches the invalidator to a poller of backing instead of
// the inotify watcher (--watch=poll): each pass's changes drop the
// guard's state and the kernel's caches of the changed names, as the
// watcher's events do; the daemon's own changes are recognised by the
// stat they left (crossmount.Mode.OwnStat).
func (d *Daemon) startPoller(backing string, matcher, jmatcher *ignore.Matcher) error {
	cfg := d.cfg
	skip, err := watchSkip(&cfg)
	if err != nil {
		return err
	}
	inv := d.FS.AttachWatcher(fusefs.WatchOptions{ShortTimeout: cfg.ShortTimeout})
	p := watcher.NewPoller(watcher.PollConfig{
		Root:     backing,
		Interval: cfg.PollInterval,
		Skip:     skip,
		Own:      d.FS.CrossMount().OwnStat,
		OnEvents: func(evs []watcher.Event) {
			d.acceptExternal(matcher, evs) // policy.go
			invalidateIgnores(matcher, evs)
			if jmatcher != nil && jmatcher != matcher {
				invalidateIgnores(jmatcher, evs)
			}
			inv.Events(evs)
		},
	})
	p.Start()
	d.FS.AddStatus(func() (string, any) {
		st, ps := inv.Stats(), p.Stats()
		st["passes"], st["names"], st["changes"], st["last_pass_ns"] = ps.Passes, ps.Names, ps.Changes, ps.LastPass.Nanoseconds()
		st["interval_ns"] = cfg.PollInterval.Nanoseconds()
		return "poller", st
	})
	d.Poller, d.Invalidation = p, inv
	return nil
}

// stopPoller stops the poller and its invalidator.
func (d *Daemon) stopPoller() {
	if d.Poller != nil {
		d.Poller.Close()
		d.Invalidation.Close()
	}
}

// pollTimeout is the kernel cache timeout under --watch=poll: the short
// timeout (at least 1 ms, default 1 s), so no cached entry or attribute
// outlives it by much, whatever a pass has not seen yet.
func pollTimeout(cfg *Config) time.Duration {
	if cfg.ShortTimeout > 0 {
		return cfg.ShortTimeout
	}
	return time.Second
}
