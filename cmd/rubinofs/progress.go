package main

// Progress on a terminal (schollz/progressbar), for the two steps that can
// take a while on big inputs: the watcher's initial walk of the workspace
// (the foreground `rubinofs mount`) and `rubinofs compact run`. Progress is
// drawn on stderr only when stderr is a terminal (golang.org/x/term): a
// pipe, a log file (a --daemon's log, a systemd journal) or a test sees no
// byte of it.

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressEnv set to 1 makes the progress bars draw even when stderr is not a
// terminal, and set to 0 keeps them off on one (for checking them by eye
// in a pipe, or silencing them).
const progressEnv = "RUBINOFS_PROGRESS"

// progressOnTerminal reports whether progress should be drawn on stderr.
func progressOnTerminal() bool {
	if v := os.Getenv(progressEnv); v != "" {
		return v == "1"
	}
	return term.IsTerminal(int(os.Stderr.Fd()))
}

// newSpinner returns an indeterminate progress bar on stderr (a spinner,
// the description and the elapsed time), or nil when stderr is not a
// terminal. It animates by itself (the library's ticker) until
// finishSpinner; a nil spinner is a no-op there.
func newSpinner(description string) *progressbar.ProgressBar {
	if !progressOnTerminal() {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(description),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSpinnerType(14),
	}
	bar := progressbar.NewOptions64(-1, opts...)
	bar.RenderBlank()
	return bar
}

// finishSpinner ends a spinner and clears its line.
func finishSpinner(bar *progressbar.ProgressBar) {
	if bar == nil {
		return
	}
	bar.Finish()
	bar.Clear()
}

// walkProgress returns a watcher progress callback (watcher.Config's
// OnProgress: directories watched so far, and whether the walk is done)
// that draws "watching the workspace" with the count, or nil when stderr is
// not a terminal. The callback is called from the walking goroutine only.
func walkProgress() func(dirs int, done bool) {
	if !progressOnTerminal() {
		return nil
	}
	var (
		once sync.Once
		bar  *progressbar.ProgressBar
	)
	return func(dirs int, done bool) {
		if done && bar == nil {
			return // a small workspace: walked before the first report
		}
		desc := fmt.Sprintf("watching the workspace: %d directories", dirs)
		once.Do(func() { bar = newSpinner(desc) })
		if bar == nil {
			return
		}
		bar.Describe(desc)
		if done {
			finishSpinner(bar)
			fmt.Fprintf(os.Stderr, "watching %d directories\n", dirs)
		}
	}
}

// compactSpinner returns a spinner for `compact run` of session id while
// the ctl write blocks (the compaction reports no steps through the control
// files, so it shows the session's size and the elapsed time), or nil when
// stderr is not a terminal.
func compactSpinner(mnt, id string) *progressbar.ProgressBar {
	if !progressOnTerminal() {
		return nil
	}
	desc := "compacting " + short(id)
	if st, _, err := readStatus(mnt, id); err == nil {
		desc = fmt.Sprintf("compacting %s (%d messages, %d tokens)", short(id), st.Messages, st.Tokens)
	}
	return newSpinner(desc)
}
