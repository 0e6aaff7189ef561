package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/fusefs"
	"github.com/rubinofs/rubinofs/guard"
)

// readyFdEnv names the descriptor a --daemon child reports readiness on.
const readyFdEnv = "RUBINOFS_READY_FD"

func mountFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mode", Value: "enforce", Usage: "guard mode: enforce, warn (allow and log) or off"},
		&cli.StringSliceFlag{Name: "exempt", Usage: "exempt paths matching `GLOB` (doublestar, workspace-relative) from the guard; repeatable"},
		&cli.BoolFlag{Name: "guard-ignored", Usage: "guard git-ignored files too (only .git/ and --exempt stay exempt)"},
		&cli.StringFlag{Name: "unregistered", Value: "guard", Usage: "callers outside any session: guard or allow"},
		&cli.StringSliceFlag{Name: "o", Usage: "FUSE mount options, comma-separated (allow_other, ro, ...)"},
		&cli.StringFlag{Name: "state-dir", Usage: "state directory (default $XDG_STATE_HOME/rubinofs/..., /var/lib/rubinofs/... for root)"},
		&cli.BoolFlag{Name: "daemon", Usage: "run in the background; return once the mount answers"},
		&cli.BoolFlag{Name: "in-place", Usage: "mount over the workspace itself (give only WORKSPACE)"},
		&cli.BoolFlag{Name: "watch", Value: true, Usage: "watch the workspace for external changes (fsnotify), so the kernel may cache long"},
		&cli.DurationFlag{Name: "cache-timeout", Usage: "kernel entry/attribute/negative cache timeout (default 1h with --watch, 1s without)"},
		&cli.DurationFlag{Name: "short-timeout", Value: time.Second, Usage: "cache timeout of subtrees the watcher does not watch"},
		&cli.StringSliceFlag{Name: "watch-skip", Usage: "do not watch directories matching `GLOB` (doublestar; default .git/objects); they get --short-timeout"},
		&cli.BoolFlag{Name: "persist-reads", Value: true, Usage: "keep read state across restarts in the state directory (revalidated by hash)"},
		&cli.IntFlag{Name: "max-watches", Usage: "at most `N` inotify watches (0: the kernel's fs.inotify.max_user_watches)"},
		&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
	}
}

func mountCommand() *cli.Command {
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount WORKSPACE at MOUNTPOINT, refusing blind writes",
		ArgsUsage: "WORKSPACE MOUNTPOINT",
		Flags:     mountFlags(),
		Action:    runMount,
	}
}

// mountConfig turns flags and arguments into a daemon.Config.
func mountConfig(c *cli.Context) (daemon.Config, error) {
	var cfg daemon.Config
	args := c.Args().Slice()
	switch {
	case c.Bool("in-place") && len(args) == 1:
		cfg.Workspace, cfg.Mountpoint, cfg.InPlace = args[0], args[0], true
	case !c.Bool("in-place") && len(args) == 2:
		cfg.Workspace, cfg.Mountpoint = args[0], args[1]
	default:
		return cfg, cli.Exit("usage: rubinofs mount [flags] WORKSPACE MOUNTPOINT (or --in-place WORKSPACE)", 2)
	}
	mode, err := guard.ParseMode(c.String("mode"))
	if err != nil {
		return cfg, cli.Exit(err.Error(), 2)
	}
	cfg.Mode = mode
	switch c.String("unregistered") {
	case "guard":
	case "allow":
		cfg.AllowUnregistered = true
	default:
		return cfg, cli.Exit("--unregistered must be guard or allow", 2)
	}
	cfg.Exempt = c.StringSlice("exempt")
	cfg.GuardIgnored = c.Bool("guard-ignored")
	for _, o := range c.StringSlice("o") {
		cfg.Options = append(cfg.Options, strings.Split(o, ",")...)
	}
	cfg.Watch = c.Bool("watch")
	cfg.CacheTimeout = c.Duration("cache-timeout")
	if cfg.CacheTimeout <= 0 {
		cfg.CacheTimeout = time.Second
		if cfg.Watch {
			cfg.CacheTimeout = time.Hour
		}
	}
	cfg.ShortTimeout = c.Duration("short-timeout")
	cfg.WatchSkip = c.StringSlice("watch-skip")
	cfg.MaxWatches = c.Int("max-watches")
	cfg.PersistReads = c.Bool("persist-reads")
	cfg.Debug = c.Bool("debug")
	cfg.Version = versionString()
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return cfg, err
	}
	cfg.StateDir = c.String("state-dir")
	if cfg.StateDir == "" {
		cfg.StateDir = defaultStateDir(ws)
	}
	return cfg, nil
}

// defaultStateDir is $XDG_STATE_HOME/rubinofs/<escaped workspace>, with
// ~/.local/state for an unset XDG_STATE_HOME and /var/lib/rubinofs for root.
func defaultStateDir(workspace string) string {
	base := os.Getenv("XDG_STATE_HOME")
	switch {
	case os.Geteuid() == 0 && base == "":
		base = "/var/lib/rubinofs"
	case base == "":
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "state", "rubinofs")
	default:
		base = filepath.Join(base, "rubinofs")
	}
	esc := strings.ReplaceAll(strings.Trim(workspace, "/"), "/", "-")
	if esc == "" {
		esc = "-"
	}
	return filepath.Join(base, esc)
}

func runMount(c *cli.Context) error {
	cfg, err := mountConfig(c)
	if err != nil {
		return err
	}
	if c.Bool("daemon") {
		return spawnDaemon(cfg, c.NArg())
	}
	ready := readyPipe()
	d, err := daemon.Start(cfg)
	if err != nil {
		if ready != nil {
			fmt.Fprintln(ready, err)
			ready.Close()
		}
		return cli.Exit(err.Error(), 1)
	}
	if d.FS.Shadowed() {
		log.Printf("warning: the workspace has its own .rubino; the control tree shadows it")
	}
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sigs:
		log.Printf("%v: unmounting %s", s, d.Mountpoint())
		if err := d.Close(); err != nil {
			return cli.Exit(err.Error(), 1)
		}
	case <-d.Done():
		d.Close()
	}
	return nil
}

// readyPipe returns the readiness descriptor a --daemon parent passed, if any.
func readyPipe() *os.File {
	v := os.Getenv(readyFdEnv)
	if v == "" {
		return nil
	}
	os.Unsetenv(readyFdEnv)
	var fd int
	if _, err := fmt.Sscan(v, &fd); err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "ready")
}

// spawnDaemon re-executes rubinofs in the foreground mode as a new session
// leader with its output in the state directory, and waits until the child
// reports the mount answering ("ok") or fails.
//
// The child runs in / (so it keeps no directory busy): the positional
// arguments (the last nargs) are passed as absolute paths.
func spawnDaemon(cfg daemon.Config, nargs int) error {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return cli.Exit(fmt.Sprintf("state directory: %v", err), 1)
	}
	logPath := filepath.Join(cfg.StateDir, "rubinofs.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	args := []string{}
	flags := os.Args[1 : len(os.Args)-nargs]
	for _, a := range flags {
		if a != "--daemon" && a != "-daemon" && a != "--daemon=true" {
			args = append(args, a)
		}
	}
	for _, p := range []string{cfg.Workspace, cfg.Mountpoint}[:nargs] {
		abs, err := filepath.Abs(p)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		args = append(args, abs)
	}
	if f := cfg.StateDir; f != "" && !filepath.IsAbs(f) {
		return cli.Exit("--state-dir must be absolute with --daemon", 2)
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(os.Environ(), readyFdEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	w.Close()
	line, rerr := bufio.NewReader(r).ReadString('\n')
	r.Close()
	line = strings.TrimSpace(line)
	if line == "ok" {
		fmt.Printf("mounted %s at %s (pid %d, log %s)\n", cfg.Workspace, cfg.Mountpoint, cmd.Process.Pid, logPath)
		cmd.Process.Release()
		return nil
	}
	cmd.Wait()
	if line == "" && errors.Is(rerr, io.EOF) {
		line = "the daemon exited before mounting; see " + logPath
	}
	return cli.Exit(line, 1)
}

func unmountCommand() *cli.Command {
	return &cli.Command{
		Name:      "unmount",
		Aliases:   []string{"umount"},
		Usage:     "unmount a rubinofs mount (also a dead one whose daemon is gone)",
		ArgsUsage: "MOUNTPOINT",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("usage: rubinofs unmount MOUNTPOINT", 2)
			}
			mnt := c.Args().First()
			if err := fusefs.Unmount(mnt); err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return nil
		},
	}
}
