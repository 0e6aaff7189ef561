package daemon

// The retention at mount: state directories of vanished workspaces under
// the user's state root, unused for state.retention, are removed after the
// mount answers (docs/DESIGN.md#state-retention).

import "os"

// startStateRetention prunes Config.StateRoot in the background when a
// retention is set; the outcome is logged (info: what was removed; warn:
// what failed).
func (d *Daemon) startStateRetention() {
	cfg := d.cfg
	if cfg.StateRoot == "" || cfg.State.Retention <= 0 {
		return
	}
	d.retentionDone = make(chan struct{})
	go func() {
		defer close(d.retentionDone)
		removed, err := PruneStateRoot(PruneOptions{Root: cfg.StateRoot, UID: os.Geteuid(), OlderThan: cfg.State.Retention})
		for _, r := range removed {
			cfg.Slog.Info("state directory removed: its workspace is gone", "dir", r.Dir, "workspace", r.Workspace,
				"bytes", r.Size, "last_use", r.LastUse.UTC().Format("2006-01-02T15:04:05Z"), "retention", cfg.State.Retention.String())
		}
		if err != nil {
			cfg.Slog.Warn("state retention: not every state directory of a vanished workspace was removed", "root", cfg.StateRoot, "err", err)
		}
	}()
}

// waitStateRetention waits for the retention at mount to finish.
func (d *Daemon) waitStateRetention() {
	if d.retentionDone != nil {
		<-d.retentionDone
	}
}
