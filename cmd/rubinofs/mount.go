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
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/fusefs"
)

// readyFdEnv names the descriptor a --daemon child reports readiness on.
const readyFdEnv = "RUBINOFS_READY_FD"

// mountArgv is the words of `rubinofs mount` from the program name to its
// last positional argument, after interspersed (flags first): what
// spawnDaemon passes on to its child. main sets it.
var mountArgv []string

// checkFuseOption accepts a FUSE mount option of -o: the ones the kernel
// takes for a rubinofs mount (helperFuseOptions) and the defaults rw and
// async. Anything else is refused by name before mounting: the kernel's
// answer would be a bare EINVAL.
func checkFuseOption(opt string) error {
	switch {
	case opt == "", helperFuseOptions[opt], helperDefaultOptions[opt]:
		return nil
	}
	known := make([]string, 0, len(helperFuseOptions))
	for o := range helperFuseOptions {
		known = append(known, o)
	}
	sort.Strings(known)
	hint := ""
	if k, _, _ := strings.Cut(opt, "="); mountFlagsByOption()[strings.ReplaceAll(k, "-", "_")] != nil {
		hint = fmt.Sprintf(" (for the rubinofs option, write --%s)", strings.ReplaceAll(k, "_", "-"))
	}
	return fmt.Errorf("-o %s: unknown mount option%s; the FUSE options are %s", opt, hint, strings.Join(known, ", "))
}

// mountFlags are --config, the flags of the config keys (keyFlags: made
// from the options table) and the flags of this mount alone, which have
// no config key.
func mountFlags() []cli.Flag {
	flags := append([]cli.Flag{configFlag()}, keyFlags()...)
	return append(flags,
		&cli.StringSliceFlag{Name: "o", Usage: "FUSE mount options, comma-separated (allow_other, ro, ...)"},
		&cli.StringFlag{Name: "state-dir", Usage: "state directory (default $XDG_STATE_HOME/rubinofs/..., /var/lib/rubinofs/... for root)"},
		&cli.BoolFlag{Name: "daemon", Usage: "run in the background; return once the mount answers"},
		&cli.BoolFlag{Name: "in-place", Usage: "mount over the workspace itself (give only WORKSPACE)"},
		&cli.DurationFlag{Name: "save-interval", Value: daemon.DefaultSaveInterval, Usage: "with --persist-reads, checkpoint the read state this often while it changes (negative: only at unmount)"},
		&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log record format: text (key=value) or json (one object a line)"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "least severe level logged: debug, info, warn or error"},
		&cli.Int64Flag{Name: "log-max-size", Value: defaultLogMaxSize, Usage: "with --daemon, rotate the state directory's rubinofs.log to rubinofs.log.1 past `BYTES` (at least 1 MiB)"},
		// Internal to `branch new`: the workspace's mountpoint and backing
		// path, where `run --branch` shows the branch daemon's mount
		// (docs/DESIGN.md#branch-ctl-paths).
		&cli.StringSliceFlag{Name: "also-at", Hidden: true, Usage: "another `PATH` callers name the mountpoint by, in control-file requests"},
	)
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

// mountConfig turns flags, arguments and the config files into a
// daemon.Config: flags given on the command line > WORKSPACE/.rubino.toml >
// the user file (--config) > agents.json/compact.json in the state
// directory > defaults (package config). A bad or loosening config file is
// a usage error (exit 2) naming the file, line and key.
func mountConfig(c *cli.Context) (daemon.Config, error) {
	var cfg daemon.Config
	args := c.Args().Slice()
	switch {
	case c.Bool("in-place") && len(args) == 1:
		cfg.Workspace, cfg.Mountpoint, cfg.InPlace = args[0], args[0], true
	case !c.Bool("in-place") && len(args) == 2:
		cfg.Workspace, cfg.Mountpoint = args[0], args[1]
	default:
		return cfg, cli.Exit("usage: rubinofs mount [flags] WORKSPACE MOUNTPOINT (or --in-place WORKSPACE); see 'rubinofs mount --help'", exitUsage)
	}
	for _, o := range c.StringSlice("o") {
		for _, opt := range strings.Split(o, ",") {
			if err := checkFuseOption(opt); err != nil {
				return cfg, cli.Exit(err.Error(), exitUsage)
			}
			cfg.Options = append(cfg.Options, opt)
		}
	}
	if os.Geteuid() != 0 && slices.Contains(cfg.Options, "allow_other") {
		// The daemon cannot take another uid's credentials (DESIGN#as-caller).
		fmt.Fprintf(os.Stderr, "rubinofs: warning: -o allow_other with a daemon that is not root (uid %d): what other users create through the mount belongs to uid %d, not to them, so they cannot chmod it; their tasks are refused, and diff and rewind show and restore nothing for them; mount as root to serve other users as themselves\n", os.Geteuid(), os.Geteuid())
	}
	for _, p := range c.StringSlice("also-at") {
		abs, err := filepath.Abs(p)
		if err != nil {
			return cfg, cli.Exit(fmt.Sprintf("--also-at: %v", err), exitUsage)
		}
		cfg.AlsoAt = append(cfg.AlsoAt, abs)
	}
	cfg.SaveInterval = c.Duration("save-interval")
	cfg.Debug = c.Bool("debug")
	logger, err := mountLogger(c) // logging.go: --log-format, --log-level
	if err != nil {
		return cfg, err
	}
	cfg.Slog = logger
	cfg.Version = versionString()
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return cfg, err
	}
	// Relative paths in flags are taken from the working directory, like
	// WORKSPACE and MOUNTPOINT, as gocryptfs (-config) and rclone
	// (--cache-dir, --config) take theirs: refusing them would only make
	// the user type $PWD. Made absolute here, before the --daemon child
	// runs in /.
	if cfg.StateDir = c.String("state-dir"); cfg.StateDir == "" {
		cfg.StateDir = defaultStateDir(ws)
	} else if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return cfg, cli.Exit(fmt.Sprintf("--state-dir: %v", err), exitUsage)
	}
	if p := c.String("config"); p != "" {
		if p, err = filepath.Abs(p); err != nil {
			return cfg, cli.Exit(fmt.Sprintf("--config: %v", err), exitUsage)
		}
		c.Set("config", p) // loadConfig reads it from c
	}
	// A dead in-place mount covers the workspace file: clear it first
	// (runMount would, after this) so the file is read from the workspace
	// itself. Not keyed on os.Stat's ENOTCONN: after a kill the kernel may
	// still answer stat from its attribute cache; RecoverDeadMount asks
	// statfs, and does nothing where no dead rubinofs mount is.
	if msg, err := fusefs.RecoverDeadMount(ws); err != nil {
		return cfg, cli.Exit(err.Error(), 1)
	} else if msg != "" {
		fmt.Fprintln(os.Stderr, "rubinofs: "+msg)
	}
	if err := daemon.CheckWorkspace(ws); err != nil { // before its file is read
		return cfg, cli.Exit(err.Error(), 1)
	}
	eff, err := loadConfig(c, ws, cfg.StateDir)
	if err != nil {
		return cfg, cli.Exit(err.Error(), 2)
	}
	applyConfig(&cfg, eff)
	cfg.StateRoot = stateRoot()
	return cfg, nil
}

// defaultStateDir is workspace's state directory under the state root
// (stateRoot).
func defaultStateDir(workspace string) string {
	return stateDirUnder(stateRoot(), workspace)
}

// stateRoot is the caller's state root: $XDG_STATE_HOME/rubinofs, with
// ~/.local/state for an unset XDG_STATE_HOME and /var/lib/rubinofs for
// root. Mounts' default state directories live in it, and `rubinofs state
// prune` and the retention at mount prune only it
// (docs/DESIGN.md#state-retention).
func stateRoot() string {
	base := os.Getenv("XDG_STATE_HOME")
	switch {
	case os.Geteuid() == 0 && base == "":
		return "/var/lib/rubinofs"
	case base == "":
		home, _ := os.UserHomeDir()
		return filepath.Join(home, ".local", "state", "rubinofs")
	}
	return filepath.Join(base, "rubinofs")
}

// stateDirUnder is workspace's state directory under base: the workspace's
// absolute path with its slashes turned into dashes ("-" for /).
func stateDirUnder(base, workspace string) string {
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
	// A dead mount left by a killed daemon (ENOTCONN) is cleared first.
	if msg, err := fusefs.RecoverDeadMount(cfg.Mountpoint); err != nil {
		return cli.Exit(err.Error(), 1)
	} else if msg != "" {
		fmt.Fprintln(os.Stderr, "rubinofs: "+msg)
	}
	// Every argument is checked before anything is created: a mistyped
	// workspace leaves no state directory or log behind, and a state
	// directory another mount holds is refused before mounting.
	if err := daemon.Check(cfg); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if c.Bool("daemon") {
		return spawnDaemon(cfg, c)
	}
	ready := readyPipe()
	cfg.WatchProgress = walkProgress() // nil unless stderr is a terminal
	// Catch SIGINT/SIGTERM before mounting: one arriving as soon as the
	// mount answers must unmount, not kill the daemon and leave a dead mount.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	setMemoryLimit()
	// A task in a branch starts through this binary's `run --branch`
	// (docs/DESIGN.md#branch-tasks).
	if self, err := os.Executable(); err == nil {
		cfg.Agents.Rubinofs = self
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		if msg := strings.TrimSpace(err.Error()); os.Geteuid() != 0 && strings.Contains(msg, "fusermount") {
			// fusermount3 printed its reason on stderr; go-fuse's error
			// gives only its raw wait status, and ends in a newline.
			if sm := fusermountStatus.FindStringSubmatch(msg); sm != nil {
				status, _ := strconv.Atoi(sm[1])
				msg = strings.Replace(msg, sm[0], fmt.Sprintf("fusermount3 exited with status %d", syscall.WaitStatus(status).ExitStatus()), 1)
			}
			err = fmt.Errorf("%s (its reason is above; `rubinofs doctor` checks /dev/fuse and fusermount3 for this user)", msg)
		}
		if ready != nil {
			fmt.Fprintln(ready, err)
			ready.Close()
		}
		return cli.Exit(err.Error(), 1)
	}
	spareProc() // procs.go: once the readers are started
	// A shadowed .rubino is logged by fusefs (level warn, with its path).
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
	} else {
		notifyReady(d.Mountpoint(), os.Getpid()) // --daemon's parent notifies for its child
	}
	select {
	case s := <-sigs:
		log.Printf("%v: unmounting %s", s, d.Mountpoint())
		notifyStopping(d.Mountpoint())
		if err := d.Close(); err != nil {
			return cli.Exit(err.Error(), 1)
		}
	case <-d.Done():
		notifyStopping(d.Mountpoint())
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
// The child runs in / (so it keeps no directory busy): it gets the flags
// as given (mountArgv: after interspersed, they precede the positional
// arguments), then the state directory, the config file and the positional
// arguments as absolute paths.
func spawnDaemon(cfg daemon.Config, c *cli.Context) error {
	nargs := c.NArg()
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return cli.Exit(fmt.Sprintf("--state-dir %s: %v", cfg.StateDir, err), 1)
	}
	logPath := filepath.Join(cfg.StateDir, "rubinofs.log")
	max, err := logMaxSize(c)
	if err != nil {
		return err
	}
	rotateFullLog(logPath, max)
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
	given := mountArgv[1 : len(mountArgv)-nargs]
	for i := 0; i < len(given); i++ {
		a := given[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case a == "--" || (name == "daemon" && a != "--daemon=false"):
		case isFlagWord(a) && (name == "state-dir" || name == "config"):
			if !hasValue {
				i++ // its value: passed below, absolute
			}
		default:
			args = append(args, a)
		}
	}
	args = append(args, "--state-dir="+cfg.StateDir)
	if p := c.String("config"); p != "" {
		args = append(args, "--config="+p)
	}
	var abs []string // the workspace and mountpoint (in place: the workspace alone)
	for _, p := range []string{cfg.Workspace, cfg.Mountpoint}[:nargs] {
		a, err := filepath.Abs(p)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		abs = append(abs, a)
	}
	args = append(args, abs...)
	// The daemon re-executes this binary by its path, not /proc/self/exe,
	// so that its comm is "rubinofs": pgrep, ps and CI's leftover check
	// see it under its name.
	self, err := os.Executable()
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	logStart, _ := logf.Seek(0, io.SeekEnd) // what this child writes starts here
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(os.Environ(), readyFdEnv+"=3", logFileEnv+"="+logPath)
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
		mnt := abs[len(abs)-1]
		fmt.Printf("mounted %s at %s (pid %d, log %s)\n", abs[0], mnt, cmd.Process.Pid, logPath)
		if cfg.InPlace {
			cwdUnderNote(mnt)
		}
		notifyReady(mnt, cmd.Process.Pid)
		cmd.Process.Release()
		return nil
	}
	cmd.Wait()
	if line == "" && errors.Is(rerr, io.EOF) {
		line = "the daemon exited before mounting; see " + logPath
	}
	if st, err := logf.Stat(); err == nil {
		if now, err := os.Stat(logPath); err != nil || !os.SameFile(st, now) {
			logStart = 0 // the child rotated the log: its records start the new file
		}
	}
	childSaid(logPath, logStart, line)
	return cli.Exit(line, 1)
}

// fusermountStatus matches go-fuse's report of a failed fusermount3, whose
// number is a wait status (256 for exit status 1).
var fusermountStatus = regexp.MustCompile(`fusermount exited with code (\d+)`)

// cwdUnderNote warns on stderr when this command's working directory, and
// so its shell's, is mnt or below it just after an in-place mount of mnt:
// that directory is now the one under the mount, and what the shell does
// there bypasses the guard until it changes directory by name.
func cwdUnderNote(mnt string) {
	cwd, err := syscall.Getwd() // the kernel's name, not $PWD's: that leads into the mount now
	if err != nil {
		return
	}
	if cwd == mnt || strings.HasPrefix(cwd, mnt+"/") {
		fmt.Fprintf(os.Stderr, "rubinofs: your working directory %s is still the directory under the mount, where writes bypass the guard: cd \"$PWD\" to enter the mount\n", cwd)
	}
}

// childSaid copies to stderr what a --daemon child that failed to mount
// wrote to its log from offset start (a helper's reason, such as
// fusermount3's, or a crash), at most its last 4 KiB, less the child's own
// last line when that repeats failure, which the caller prints.
func childSaid(logPath string, start int64, failure string) {
	f, err := os.Open(logPath)
	if err != nil {
		return
	}
	defer f.Close()
	const most = 4 << 10
	if end, err := f.Seek(0, io.SeekEnd); err != nil || end <= start {
		return
	} else if end-start > most {
		start = end - most
	}
	b := make([]byte, most)
	n, _ := f.ReadAt(b, start)
	var kept []string // less the daemon's informational log lines
	for _, l := range strings.Split(string(b[:n]), "\n") {
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, " level=INFO ") {
			kept = append(kept, l)
		}
	}
	said := strings.TrimRight(strings.Join(kept, "\n"), "\n")
	if i := strings.LastIndexByte(said, '\n'); strings.HasSuffix(said, failure) {
		said = said[:max(i, 0)]
	}
	if said != "" {
		fmt.Fprintln(os.Stderr, said)
	}
}

// exitBusy is the exit status of `rubinofs unmount` refusing a busy mount
// (1 is any other failure, 2 a usage error).
const exitBusy = 16 // EBUSY's number, as a reminder

func unmountCommand() *cli.Command {
	return &cli.Command{
		Name:    "unmount",
		Aliases: []string{"umount"},
		Usage:   "unmount a rubinofs mount (also a dead one whose daemon is gone)",
		Description: `A live mount in use (open files, working directories, running tasks) is
refused: the message says busy and the exit status is 16. --lazy detaches it
instead: it leaves the namespace at once, open files keep working until they
are closed, the mount's tasks are stopped, and the daemon exits when the last
file is closed. A dead mount (ENOTCONN: its daemon was killed) is detached.
See docs/RELIABILITY.md.`,
		ArgsUsage: "MOUNTPOINT",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "lazy", Aliases: []string{"l"}, Usage: "detach a busy mount (MNT_DETACH); the daemon exits when the last open file is closed"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("usage: rubinofs unmount [--lazy] MOUNTPOINT", 2)
			}
			what, err := fusefs.UnmountWith(c.Args().First(), c.Bool("lazy"), mountGone) // probe.go
			if errors.Is(err, fusefs.ErrBusy) {
				return cli.Exit("rubinofs: "+err.Error(), exitBusy)
			}
			if err != nil {
				return cli.Exit("rubinofs: "+err.Error(), 1)
			}
			if !strings.HasPrefix(what, "unmounted ") { // say what a lazy or dead unmount did
				fmt.Fprintln(os.Stderr, "rubinofs: "+what)
			}
			return nil
		},
	}
}
