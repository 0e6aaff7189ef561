package daemon

// The read state kept across restarts (Config.PersistReads): loaded at
// mount, checkpointed while it changes, saved at unmount.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// checkpoints saves the read state every interval when it changed (by the
// guard's counters and the session count) until stopSaves closes. A failed
// save is retried at the next tick.
func (d *Daemon) checkpoints(interval time.Duration) {
	defer close(d.savesDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	var last [3]uint64
	for {
		select {
		case <-d.stopSaves:
			return
		case <-t.C:
		}
		c := d.Guard.Counts()
		sig := [3]uint64{c.Reads, c.Writes, uint64(c.Sessions)<<32 | uint64(len(d.Sessions.Live()))}
		if sig == last {
			continue
		}
		if d.saveReads(false) == nil {
			last = sig
		}
	}
}

// readsFile is where PersistReads keeps the read state.
func (d *Daemon) readsFile() string { return filepath.Join(d.cfg.StateDir, "reads.json") }

// loadReads restores the saved read state, revalidating every record.
func (d *Daemon) loadReads() {
	f, err := os.Open(d.readsFile())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.cfg.Slog.Warn("read state not restored: every session reads again", "path", d.readsFile(), "err", err)
		}
		return
	}
	defer f.Close()
	roots, kept, dropped, err := d.Guard.Load(f, d.FS.LookupTarget)
	if err != nil {
		d.cfg.Slog.Warn("read state ignored: every session reads again", "path", d.readsFile(), "err", err)
		return
	}
	restored := 0
	for _, r := range roots {
		if d.Sessions.Restore(r) == nil {
			restored++
		}
	}
	d.cfg.Slog.Info("read state restored", "path", d.readsFile(), "kept", kept, "dropped", dropped,
		"sessions_live", restored, "sessions_saved", len(roots))
}

// saveReads writes the read state atomically and durably (temp file,
// fsync, rename): a failure leaves the previous reads.json as it was. The
// outcome goes to .rubino/status ("state"). A checkpoint's failure is
// logged at level warn when it is new (it differs from the last one: the
// same error every interval is logged once) and the first success after
// failures at info; the final save's (final, at unmount) failure at level
// error, since nothing retries it and the next mount starts without it.
func (d *Daemon) saveReads(final bool) error {
	tmp := d.readsFile() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err == nil {
		bw := bufio.NewWriter(f)
		err = d.Guard.Save(bw, d.Sessions.Live())
		if err == nil {
			err = bw.Flush()
		}
		if err == nil {
			err = f.Sync() // ENOSPC and EIO may only show here
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, d.readsFile())
	}
	if err != nil {
		os.Remove(tmp)
		err = fmt.Errorf("saving read state: %w", err)
	}
	newErr, recovered := d.state.note(err)
	switch {
	case err != nil && final:
		d.cfg.Slog.Error("saving read state at unmount failed: the next mount starts without it",
			"path", d.readsFile(), "err", err)
	case newErr:
		d.cfg.Slog.Warn("saving read state failed: the guard keeps deciding from memory; retrying while the state changes",
			"path", d.readsFile(), "err", err)
	case recovered:
		d.cfg.Slog.Info("saving read state works again", "path", d.readsFile())
	}
	return err
}
