package main

// `rubinofs session` and the cgroup side of `rubinofs run`: sessions rooted
// at a cgroup, kept sessions and joining them (docs/DESIGN.md#cgroup-sessions).

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/internal/procfs"
	"github.com/rubinofs/rubinofs/internal/sessionctl"
	"github.com/rubinofs/rubinofs/sessions"
)

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "register or end guard sessions rooted at a cgroup, or kept with no root",
		Subcommands: []*cli.Command{
			{
				Name:      "new",
				Usage:     "register a session rooted at a cgroup (--cgroup PATH), or one with no root that stays until ended (--keep); print its name",
				ArgsUsage: "[NAME]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "cgroup", Usage: "root the session at cgroup `PATH` (as in /proc/PID/cgroup, or a directory under the cgroup v2 mount); it ends when the cgroup is removed"},
					&cli.BoolFlag{Name: "keep", Usage: "a session with no root: it stays until rubinofs session end NAME; join it with rubinofs run --session NAME --join"},
					mountFlag(),
				},
				Action: sessionNew,
			},
			{
				Name:      "end",
				Usage:     "end a session",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{mountFlag()},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return cli.Exit("usage: rubinofs session end NAME", exitUsage)
					}
					mnt, err := mountOf(c)
					if err != nil {
						return err
					}
					if err := writeCtl(mnt, "sessions/ctl", []byte("end "+c.Args().First()+"\n")); err != nil {
						return cli.Exit(err.Error(), 1)
					}
					return nil
				},
			},
		},
	}
}

// sessionNew is `rubinofs session new`.
func sessionNew(c *cli.Context) error {
	cg, keep := c.String("cgroup"), c.Bool("keep")
	if c.NArg() > 1 || (cg == "") == !keep {
		return cli.Exit("usage: rubinofs session new --cgroup PATH [NAME] | rubinofs session new --keep NAME", exitUsage)
	}
	if keep && c.NArg() == 0 {
		return cli.Exit("rubinofs session new --keep: give the session a NAME (to join it by)", exitUsage)
	}
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	var spec []string
	if name := c.Args().First(); name != "" {
		spec = append(spec, "name="+name)
	}
	if keep {
		spec = append(spec, "keep=1")
	} else {
		if strings.ContainsAny(cg, " \t\n") {
			return cli.Exit(fmt.Sprintf("--cgroup %q: a cgroup path with white space cannot be registered", cg), exitUsage)
		}
		spec = append(spec, "cgroup="+cg)
	}
	id, err := cloneCtl(mnt, "sessions/clone", []byte(strings.Join(spec, " ")+"\n"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("registering the session: %v", err), 1)
	}
	fmt.Fprintln(c.App.Writer, id)
	return nil
}

// runCgroupFlags are `rubinofs run`'s flags for cgroups and joining.
func runCgroupFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "cgroup", Usage: "root the session at a new child cgroup (under --cgroup-parent) and move into it before exec: daemonised descendants stay in the session; with --join, move into the session's cgroup"},
		&cli.StringFlag{Name: "cgroup-parent", Usage: "with --cgroup, create the session's cgroup under `PATH` (a cgroup path as in /proc/self/cgroup; default: this process's own cgroup); it must be writable (root, or a delegated subtree)"},
		&cli.BoolFlag{Name: "join", Usage: "run CMD in the existing session --session NAME (the mount's owner only: joining shares its reads)"},
	}
}

// runSessionSpec moves this process into a cgroup when asked (run
// --cgroup) and returns the sessions/clone spec that registers or joins
// its session, without cmd=. undo moves the process back and removes a
// cgroup it made, for when the registration fails. after is what to do
// once the registration succeeded: with --join --cgroup, move into the
// session's cgroup. That move comes after the join, never before: a
// process already in the session's cgroup is inside the session, and the
// daemon lets only a caller outside every session join one.
func runSessionSpec(c *cli.Context, mnt string) (spec string, undo func(), after func() error, err error) {
	name := c.String("session")
	undo = func() {}
	after = func() error { return nil }
	if c.Bool("join") {
		if name == "" {
			return "", undo, after, cli.Exit("rubinofs run --join: name the session with --session NAME", exitUsage)
		}
		if c.Bool("harness") {
			return "", undo, after, cli.Exit("rubinofs run --join: --harness takes a new session", exitUsage)
		}
		if c.Bool("cgroup") {
			after = func() error {
				if err := joinSessionCgroup(mnt, name); err != nil {
					return cli.Exit(err.Error(), 1)
				}
				return nil
			}
		}
		return "join=" + name + " ", undo, after, nil
	}
	if !c.Bool("cgroup") {
		if c.IsSet("cgroup-parent") {
			return "", undo, after, cli.Exit("rubinofs run: --cgroup-parent takes --cgroup", exitUsage)
		}
		if name != "" {
			spec = "name=" + name + " "
		}
		if c.Bool("harness") {
			spec += "harness=1 "
		}
		return spec, undo, after, nil
	}
	if c.Bool("harness") {
		return "", undo, after, cli.Exit("rubinofs run: --harness takes a process root, not --cgroup", exitUsage)
	}
	if name == "" {
		var b [4]byte
		rand.Read(b[:])
		name = "s-" + hex.EncodeToString(b[:])
	}
	from, dir, err := makeSessionCgroup(c.String("cgroup-parent"), name)
	if err != nil {
		return "", undo, after, cli.Exit(err.Error(), 1)
	}
	undo = func() {
		moveSelf(from)
		os.Remove(dir)
	}
	return "name=" + name + " cgroup=self remove=1 ", undo, after, nil
}

// ownCgroup returns this process's cgroup v2 directory and the hierarchy's
// mount point.
func ownCgroup() (dir, mnt string, err error) {
	mnt, err = procfs.Cgroup2Mount()
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(mnt, p), mnt, nil
		}
	}
	return "", "", errors.New("this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

// makeSessionCgroup creates the cgroup rubino-NAME under parent (a cgroup
// path; "" for this process's own cgroup) and moves this process into it.
// It returns the directory of the cgroup the process was in, and the new
// one's.
func makeSessionCgroup(parent, name string) (from, dir string, err error) {
	from, mnt, err := ownCgroup()
	if err != nil {
		return "", "", fmt.Errorf("--cgroup: %v", err)
	}
	base := from
	if parent != "" {
		p, err := sessions.CgroupPath(parent, mnt)
		if err != nil {
			return "", "", fmt.Errorf("--cgroup-parent: %v", err)
		}
		base = filepath.Join(mnt, p)
	}
	dir = filepath.Join(base, sessionctl.RunCgroupPrefix+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("--cgroup: creating the session's cgroup: %v (run as root, or give --cgroup-parent a delegated subtree)", err)
	}
	if err := moveSelf(dir); err != nil {
		os.Remove(dir)
		return "", "", fmt.Errorf("--cgroup: moving into %s: %v", dir, err)
	}
	return from, dir, nil
}

// moveSelf moves this process (all its threads) into the cgroup directory dir.
func moveSelf(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0)
}

// joinSessionCgroup moves this process into the cgroup of session name, as
// its info file gives it.
func joinSessionCgroup(mnt, name string) error {
	b, err := readCtl(mnt, "sessions/"+name+"/info")
	if err != nil {
		return err
	}
	var info struct {
		Live     bool   `json:"live"`
		RootKind string `json:"root_kind"`
		RootPath string `json:"root_path"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("session %s: %v", name, err)
	}
	if !info.Live {
		return fmt.Errorf("session %s is not live", name)
	}
	if info.RootKind != "cgroup" {
		return fmt.Errorf("session %s is rooted at a %s, not a cgroup: join it without --cgroup", name, info.RootKind)
	}
	mntCg, err := procfs.Cgroup2Mount()
	if err != nil {
		return fmt.Errorf("--cgroup: %v", err)
	}
	if err := moveSelf(filepath.Join(mntCg, info.RootPath)); err != nil {
		return fmt.Errorf("--cgroup: moving into the cgroup %s of session %s: %v", info.RootPath, name, err)
	}
	return nil
}
