package tasks

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// LogPath returns the log file of task id.
func (rn *Runner) LogPath(id string) string {
	return filepath.Join(rn.cfg.LogDir, rn.run+"-"+id+".log")
}

// logTailMax bounds what the log file serves; the whole log stays in the
// state directory.
const logTailMax = 1 << 20

// readLog serves the log file of task id: its last logTailMax bytes, after
// a line naming the whole file when it is longer; empty before the task
// wrote anything.
func (rn *Runner) readLog(id string) ([]byte, error) {
	if _, err := rn.find(id); err != nil {
		return nil, err
	}
	f, err := os.Open(rn.LogPath(id))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var head string
	if st.Size() > logTailMax {
		head = fmt.Sprintf("[%d earlier bytes in %s]\n", st.Size()-logTailMax, rn.LogPath(id))
		if _, err := f.Seek(st.Size()-logTailMax, io.SeekStart); err != nil {
			return nil, err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, logTailMax))
	return append([]byte(head), b...), err
}

// prune removes the oldest finished tasks beyond KeepFinished
// (Registry.Prune: live tasks and the lineage of live tasks are kept) and
// then, outside the registry mutex, deletes their log files. Called after
// every task finishes and after every spawn.
func (rn *Runner) prune() {
	for _, t := range rn.reg.Prune(rn.cfg.KeepFinished) {
		if err := os.Remove(rn.LogPath(t.ID)); err != nil && !os.IsNotExist(err) {
			rn.cfg.Logger.Warn("task pruned, but its log stays", "task", t.ID, "err", err)
		}
	}
}

// logNameRE matches the log files a Runner writes (LogPath):
// RUNSTART-ID.log with RUNSTART as 20060102T150405.
var logNameRE = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}-[0-9]+\.log$`)

// pruneOldLogs bounds the logs that earlier runs (earlier mounts) left in
// the log directory: it keeps the newest KeepFinished of them (by name,
// which starts with the run's start time, then by id) and removes the rest.
// Only names matching logNameRE are touched. Errors are logged, never
// fatal: a log directory we cannot list or clean still works.
func (rn *Runner) pruneOldLogs() {
	ents, err := os.ReadDir(rn.cfg.LogDir)
	if err != nil {
		rn.cfg.Logger.Warn("listing the agents log directory failed: old task logs stay", "dir", rn.cfg.LogDir, "err", err)
		return
	}
	type logName struct {
		run string
		id  uint64
		n   string
	}
	var old []logName
	for _, de := range ents {
		n := de.Name()
		if !de.Type().IsRegular() || !logNameRE.MatchString(n) || strings.HasPrefix(n, rn.run+"-") {
			continue
		}
		run, idStr, _ := strings.Cut(strings.TrimSuffix(n, ".log"), "-")
		id, _ := strconv.ParseUint(idStr, 10, 64)
		old = append(old, logName{run, id, n})
	}
	if len(old) <= rn.cfg.KeepFinished {
		return
	}
	sort.Slice(old, func(i, j int) bool { // newest first
		if old[i].run != old[j].run {
			return old[i].run > old[j].run
		}
		return old[i].id > old[j].id
	})
	for _, l := range old[rn.cfg.KeepFinished:] {
		if err := os.Remove(filepath.Join(rn.cfg.LogDir, l.n)); err != nil && !os.IsNotExist(err) {
			rn.cfg.Logger.Warn("removing an old task log failed", "err", err)
		}
	}
}
