package main

// Structured logging of `rubinofs mount` through log/slog.

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// logFileEnv names, in a --daemon child's environment, the log file its
// stdout and stderr are (the state directory's rubinofs.log): the child
// bounds it (boundedLog).
const logFileEnv = "RUBINOFS_LOG_FILE"

// defaultLogMaxSize is --log-max-size's default (bytes), and
// minLogMaxSize its least value.
const (
	defaultLogMaxSize = 32 << 20
	minLogMaxSize     = 1 << 20
)

// mountLogger builds the mount's logger from --log-format and --log-level
// (writing to stderr, which --daemon points at the state directory's
// rubinofs.log, bounded by --log-max-size: boundedLog) and makes it
// slog's default, so the log package's default logger writes through it
// too. --debug (go-fuse's per-request trace, debug records) lowers the
// default level to debug; an explicit --log-level wins. A bad value is a
// usage error (exit 2).
func mountLogger(c *cli.Context) (*slog.Logger, error) {
	level := c.String("log-level")
	if c.Bool("debug") && !c.IsSet("log-level") {
		level = "debug"
	}
	max, err := logMaxSize(c)
	if err != nil {
		return nil, err
	}
	var w io.Writer = os.Stderr
	if path := os.Getenv(logFileEnv); path != "" {
		os.Unsetenv(logFileEnv) // not the tasks' business
		w = newBoundedLog(path, max)
	}
	l, err := newLogger(w, c.String("log-format"), level)
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	slog.SetDefault(l)
	return l, nil
}

// newLogger returns a logger writing records of at least level to w:
// format "text" is slog's key=value lines (slog.TextHandler), "json" one
// JSON object per line (slog.JSONHandler). level is debug, info, warn or
// error (any case; slog's "info+2" forms too). Errors name the bad value
// and the accepted ones.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// logMaxSize returns --log-max-size (bytes), or a usage error (exit 2)
// naming the flag and its least value.
func logMaxSize(c *cli.Context) (int64, error) {
	max := c.Int64("log-max-size")
	if max < minLogMaxSize {
		return 0, cli.Exit(fmt.Sprintf("--log-max-size %d: want at least %d bytes (1 MiB)", max, minLogMaxSize), 2)
	}
	return max, nil
}

// boundedLog is a --daemon child's log: the records go to stderr, which
// is the state directory's rubinofs.log (and so is stdout), and past max
// bytes the file is rotated: a new file is made (rubinofs.log.new) and put
// in place of descriptors 2 and 1 (dup3), so that what writes to them
// directly (a crash's trace, go-fuse's own messages) follows; then the
// full one is renamed rubinofs.log.1, replacing the one before, and the
// new one rubinofs.log. The log then holds at most about twice max: no
// workload can fill the disk through it (a process retrying a refused
// write at 10,000 a second wrote 1.4 MB a second of records before).
// Not a rotation library: those rotate the file they write, and leave
// descriptor 2, where the Go runtime writes a crash, on the old one.
// When the new file cannot be made, or descriptor 2 is not the file at
// path (its name was replaced), the file is truncated instead: records
// are lost, the bound holds. Safe for concurrent use.
type boundedLog struct {
	mu      sync.Mutex
	path    string
	max     int64
	size    int64 // bytes in the current file, as far as this process knows
	inPlace bool  // descriptor 2 is not the file at path: truncate it, rename nothing
}

// newBoundedLog bounds the log file at path, which descriptor 2 should be.
func newBoundedLog(path string, max int64) *boundedLog {
	l := &boundedLog{path: path, max: max}
	var st, at unix.Stat_t
	if unix.Fstat(2, &st) == nil {
		l.size = st.Size
	}
	if unix.Stat(path, &at) != nil || at.Dev != st.Dev || at.Ino != st.Ino {
		l.inPlace = true
	}
	return l
}

// Write writes one record to stderr, rotating the file first when the
// record would take it past max.
func (l *boundedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(p)) > l.max {
		l.rotate()
	}
	n, err := os.Stderr.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate moves descriptors 1 and 2 to a new file and names it path, the
// full one path.1. Called with mu held.
func (l *boundedLog) rotate() {
	l.size = 0
	if l.inPlace {
		unix.Ftruncate(2, 0) // O_APPEND: the next record starts the file again
		return
	}
	fresh := l.path + ".new"
	f, err := os.OpenFile(fresh, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err == nil {
		if err = unix.Dup3(int(f.Fd()), 2, 0); err == nil {
			err = unix.Dup3(int(f.Fd()), 1, 0)
		}
		f.Close()
	}
	if err != nil {
		os.Remove(fresh)
		unix.Ftruncate(2, 0)
		unix.Ftruncate(1, 0)
		fmt.Fprintf(os.Stderr, "rubinofs: log rotation failed, earlier records dropped: %v\n", err)
		return
	}
	rotateLog(l.path)        // the full file becomes path.1
	os.Rename(fresh, l.path) // and the one descriptors 1 and 2 are, path
}

// rotateLog renames the log at path to path.1, replacing an older one.
func rotateLog(path string) error {
	return os.Rename(path, path+".1")
}

// rotateFullLog rotates the log at path before a --daemon child is
// started, when it already holds max bytes or more (earlier mounts'
// records), so the child starts a new file. (When the child's own first
// records rotate it, the parent reads the new file from its start.)
func rotateFullLog(path string, max int64) {
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() && st.Size() >= max {
		rotateLog(path)
	}
}
