package main

// Structured logging of `rubinofs mount` through log/slog.

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// mountLogger builds the mount's logger from --log-format and --log-level
// (writing to stderr, which --daemon points at the state directory's
// rubinofs.log) and makes it slog's default, so the log package's default
// logger writes through it too. --debug (go-fuse's per-request trace,
// debug records) lowers the default level to debug; an explicit
// --log-level wins. A bad value is a usage error (exit 2).
func mountLogger(c *cli.Context) (*slog.Logger, error) {
	level := c.String("log-level")
	if c.Bool("debug") && !c.IsSet("log-level") {
		level = "debug"
	}
	l, err := newLogger(os.Stderr, c.String("log-format"), level)
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
