package main

// `rubinofs branch new|ls|discard`: copy-on-write views of the workspace
// (docs/DESIGN.md#branches). The layout and the overlay are package
// branch's; this file finds the workspace from its mount's status, starts
// and stops the branch daemon (`rubinofs mount --daemon` over the
// overlay) and prints.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/branch"
	"github.com/rubinofs/rubinofs/fusefs"
)

func branchCommand() *cli.Command {
	return &cli.Command{
		Name:  "branch",
		Usage: "copy-on-write views of the workspace: make one, list them, diff one, merge one back through the guard, discard one; run a command in one with `rubinofs run --branch NAME`",
		Subcommands: []*cli.Command{
			{
				Name:      "new",
				Usage:     "make branch NAME of the workspace (an overlay with its own guarded mount) and print its mount path (needs root)",
				ArgsUsage: "NAME",
				Flags:     append([]cli.Flag{mountFlag()}, branchFromFlags()...),
				Action:    branchNew,
			},
			{
				Name:   "ls",
				Usage:  "list the workspace's branches: name, created, changed paths, mounted",
				Flags:  []cli.Flag{mountFlag(), &cli.BoolFlag{Name: "json", Usage: "one JSON array"}},
				Action: branchLs,
			},
			{
				Name:      "discard",
				Usage:     "unmount branch NAME and remove it with its changes (refused while it has live sessions, unless --force)",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{mountFlag(), &cli.BoolFlag{Name: "force", Usage: "discard even while sessions of the branch are live: their files go away (ENOTCONN)"}},
				Action:    branchDiscard,
			},
			branchDiffCommand(),
			branchMergeCommand(),
		},
	}
}

// wsStatus is what the branch commands need of a workspace mount's
// .rubino/status.
type wsStatus struct {
	Pid       int    `json:"pid"`
	Workspace string `json:"workspace"`
	State     struct {
		Dir string `json:"dir"`
	} `json:"state"`
}

// workspaceOf finds the workspace mount of c (--mount, $RUBINO_MOUNT, the
// current directory) and reads its status; errors exit 1.
func workspaceOf(c *cli.Context) (string, wsStatus, error) {
	var st wsStatus
	mnt, err := mountOf(c)
	if err != nil {
		return "", st, err
	}
	b, err := readCtl(mnt, "status")
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err == nil && (st.State.Dir == "" || st.Workspace == "") {
		err = errors.New("no state.dir or workspace in it")
	}
	if err != nil {
		return "", st, cli.Exit(fmt.Sprintf("reading %s: %v", ctlPathOf(mnt, "status"), err), 1)
	}
	return mnt, st, nil
}

// branchName is the one NAME argument of a branch subcommand, checked
// (usage error, exit 2, otherwise).
func branchName(c *cli.Context) (string, error) {
	usage := fmt.Sprintf("usage: rubinofs branch %s [--mount DIR] NAME", c.Command.Name)
	if c.NArg() != 1 {
		return "", cli.Exit(usage, exitUsage)
	}
	name := c.Args().First()
	if !branch.ValidName(name) {
		return "", cli.Exit(fmt.Sprintf("bad branch name %q: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit; %s", name, usage), exitUsage)
	}
	return name, nil
}

func branchNew(c *cli.Context) error {
	name, err := branchName(c)
	if err != nil {
		return err
	}
	b, err := makeBranch(c, name)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, b.Mnt())
	return nil
}

// makeBranch makes branch name of the workspace of c (--mount,
// $RUBINO_MOUNT, the working directory) and starts its daemon: `branch
// new`, and `run --new-branch` for a task under isolation=branch
// (docs/DESIGN.md#branch-tasks). It reports the times on c's error
// writer. Errors (cli exits, status 1): not root, no workspace, the branch
// exists, the overlay or the daemon failed (nothing is kept then).
func makeBranch(c *cli.Context, name string) (*branch.Branch, error) {
	if os.Geteuid() != 0 {
		return nil, cli.Exit("rubinofs branch new: mounting a branch's overlay needs root (CAP_SYS_ADMIN); run it as root", 1)
	}
	mnt, st, err := workspaceOf(c)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("finding the rubinofs executable: %v", err), 1)
	}
	t0 := time.Now()
	lower := st.Workspace
	if filepath.Clean(st.Workspace) == filepath.Clean(mnt) {
		// In place: the path names the FUSE mount; the overlay's lower
		// layer is the directory hidden under it, which the workspace
		// daemon holds open.
		var mst unix.Stat_t
		if err := unix.Stat(mnt, &mst); err != nil {
			return nil, cli.Exit(err.Error(), 1)
		}
		f, err := branch.LowerFD(st.Pid, st.Workspace, mst.Dev)
		if err != nil {
			return nil, cli.Exit(fmt.Sprintf("rubinofs branch new: the workspace is mounted in place and its hidden directory cannot be opened: %v", err), 1)
		}
		defer f.Close()
		lower = "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	}
	from, session, err := branchFrom(c, mnt, st.State.Dir)
	if err != nil {
		return nil, err
	}
	meta := branch.Meta{Name: name, Created: time.Now().UTC(), Workspace: st.Workspace, Mount: mnt, Owner: os.Getuid()}
	var b *branch.Branch
	if from != nil {
		meta.From, meta.Session = c.String("from"), session
		b, err = branch.CreateFrom(st.State.Dir, meta, lower, *from)
	} else {
		b, err = branch.Create(st.State.Dir, meta, lower)
	}
	if errors.Is(err, branch.ErrExists) {
		return nil, cli.Exit(fmt.Sprintf("rubinofs branch new: branch %s exists (`rubinofs branch ls`; discard it first with `rubinofs branch discard %s`)", name, name), 1)
	}
	if err != nil {
		return nil, cli.Exit("rubinofs branch new: "+err.Error(), 1)
	}
	view := time.Since(t0)
	// The branch daemon: no watcher (inotify on an overlay does not see a
	// change made to the lower layer directly), so the kernel caches
	// expire after --cache-timeout's default without it, 1 s
	// (docs/DESIGN.md#branches).
	args := append([]string{"mount", "--daemon"}, inheritedMountFlags(st.Pid)...)
	args = append(args, "--state-dir", b.State(), "--watch=false")
	// Callers in the branch name its files by the workspace's paths
	// (run --branch binds the mount over both): the daemon takes them as
	// its own mountpoint's (docs/DESIGN.md#branch-ctl-paths).
	args = append(args, "--also-at", mnt)
	if filepath.Clean(st.Workspace) != filepath.Clean(mnt) {
		args = append(args, "--also-at", st.Workspace)
	}
	if allowOther(mnt) {
		args = append(args, "-o", "allow_other")
	}
	var out bytes.Buffer
	cmd := exec.Command(self, append(args, b.Merged(), b.Mnt())...)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(c.App.ErrWriter, &out), c.App.ErrWriter
	if err := cmd.Run(); err != nil {
		b.Remove()
		return nil, cli.Exit(fmt.Sprintf("rubinofs branch new: starting the branch daemon failed (%v; the reason is above); nothing was kept", err), 1)
	}
	if sm := launchedPidRE.FindStringSubmatch(out.String()); sm != nil {
		pid, _ := strconv.Atoi(sm[1])
		b.SetDaemonPid(pid)
	}
	fmt.Fprintf(c.App.ErrWriter, "branch %s: view made in %.1f ms, its daemon answering after %.1f ms\n",
		name, float64(view.Microseconds())/1000, float64(time.Since(t0).Microseconds())/1000)
	return b, nil
}

// branchOwnFlags are the mount flags the branch daemon sets itself (its
// state directory, its watch and cache settings), never inherited.
var branchOwnFlags = map[string]bool{
	"state-dir": true, "daemon": true, "in-place": true, "watch": true, "watch-mode": true,
	"cache-timeout": true, "short-timeout": true, "poll-interval": true, "watch-skip": true,
	"max-watches": true, "shared": true, "peer-detect": true, "also-at": true,
}

// inheritedMountFlags returns the mount flags the workspace daemon pid was
// started with (its /proc/PID/cmdline, `rubinofs mount FLAGS... WS [MNT]`
// as a --daemon launcher passes them on) less branchOwnFlags, so that a
// branch is guarded as its workspace is (--mode, --exempt, --unlink, the
// journal's settings...). None for a daemon started otherwise (mount(8)'s
// helper) or whose command line cannot be read.
func inheritedMountFlags(pid int) []string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	words := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	if len(words) < 4 || words[1] != "mount" {
		return nil
	}
	rest, positional := words[2:], 2
	for _, w := range rest {
		if w == "--in-place" || w == "--in-place=true" {
			positional = 1
		}
	}
	if len(rest) < positional {
		return nil
	}
	mc := mountCommand()
	var out []string
	flags := rest[:len(rest)-positional]
	for i := 0; i < len(flags); i++ {
		w := flags[i]
		if !isFlagWord(w) {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		value := !hasValue && takesValue(mc, w) && i+1 < len(flags)
		if !branchOwnFlags[name] {
			out = append(out, w)
			if value {
				out = append(out, flags[i+1])
			}
		}
		if value {
			i++
		}
	}
	return out
}

// launchedPidRE finds the daemon's pid in the output of `mount --daemon`.
var launchedPidRE = regexp.MustCompile(`\(pid (\d+),`)

// allowOther reports whether the mount at mnt was made with allow_other:
// the branch daemon is then mounted with it too.
func allowOther(mnt string) bool {
	infos, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(mnt))
	if err != nil || len(infos) == 0 {
		return false
	}
	return strings.Contains(","+infos[len(infos)-1].VFSOptions+",", ",allow_other,")
}

// branchRow is one branch as `branch ls --json` prints it.
type branchRow struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Changed int       `json:"changed"` // paths in the upper layer (branch.Changed)
	Mounted bool      `json:"mounted"` // the branch daemon is mounted
	Path    string    `json:"path"`    // the branch daemon's mountpoint
}

func branchLs(c *cli.Context) error {
	if c.NArg() != 0 {
		return cli.Exit("usage: rubinofs branch ls [--json] [--mount DIR]", exitUsage)
	}
	_, st, err := workspaceOf(c)
	if err != nil {
		return err
	}
	bs, err := branch.List(st.State.Dir)
	if err != nil {
		return cli.Exit("rubinofs branch ls: "+err.Error(), 1)
	}
	rows := []branchRow{}
	for _, b := range bs {
		n, err := b.Changed()
		if err != nil {
			n = -1
		}
		rows = append(rows, branchRow{Name: b.Meta.Name, Created: b.Meta.Created, Changed: n, Mounted: b.DaemonMounted(), Path: b.Mnt()})
	}
	if c.Bool("json") {
		js, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Fprintln(c.App.Writer, string(js))
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCREATED\tCHANGED\tMOUNTED\tPATH")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\n", r.Name, r.Created.Format(time.RFC3339), r.Changed, r.Mounted, r.Path)
	}
	return tw.Flush()
}

func branchDiscard(c *cli.Context) error {
	name, err := branchName(c)
	if err != nil {
		return err
	}
	_, st, err := workspaceOf(c)
	if err != nil {
		return err
	}
	b, err := branch.Open(st.State.Dir, name)
	if errors.Is(err, branch.ErrNotFound) {
		return cli.Exit(fmt.Sprintf("rubinofs branch discard: no branch %s (`rubinofs branch ls` lists them)", name), 1)
	}
	if err != nil {
		return cli.Exit("rubinofs branch discard: "+err.Error(), 1)
	}
	pid := b.DaemonPid()
	if pid > 0 && !servesMount(pid, b.Mnt()) {
		pid = 0 // exited since; the pid may be another process's now
	}
	if b.DaemonMounted() {
		live, err := liveSessions(b.Mnt(), "")
		if err == nil && len(live) > 0 && !c.Bool("force") {
			return cli.Exit(fmt.Sprintf("rubinofs branch discard: branch %s has live sessions (%s): end them, or discard with --force", name, strings.Join(live, ", ")), 1)
		}
		if p := branchDaemonPid(b.Mnt()); p > 0 {
			pid = p
		}
		if c.Bool("force") {
			abortConnection(b.Mnt()) // a process in the branch's namespace keeps it otherwise
		}
		if _, err := fusefs.UnmountWith(b.Mnt(), c.Bool("force"), mountGone); err != nil { // probe.go
			return cli.Exit(fmt.Sprintf("rubinofs branch discard: %v (a process has files open in the branch: end it, or --force)", err), 1)
		}
	}
	// Unmounted here, the daemon may still serve a bind of its mount in
	// the private namespace of a `run --branch` (a forced discard, or a
	// discard before).
	if pid > 0 && c.Bool("force") && !waitGone(pid, 2*time.Second) {
		stopBranchDaemon(pid, b.Mnt())
	}
	if pid > 0 && !waitGone(pid, 30*time.Second) {
		return cli.Exit(fmt.Sprintf("rubinofs branch discard: the branch daemon (pid %d) did not exit after its unmount (a `run --branch` still uses it): end it, or discard with --force; the branch is kept at %s", pid, b.Dir), 1)
	}
	if err := b.Remove(); err != nil {
		return cli.Exit("rubinofs branch discard: "+err.Error(), 1)
	}
	fmt.Fprintf(c.App.Writer, "discarded branch %s\n", name)
	return nil
}

// branchDaemonPid is the pid in the .rubino/status of the mount at mnt, or
// 0 when it cannot be read.
func branchDaemonPid(mnt string) int {
	var st wsStatus
	b, err := readCtl(mnt, "status")
	if err != nil || json.Unmarshal(b, &st) != nil {
		return 0
	}
	return st.Pid
}

// abortConnection aborts the FUSE connection of the mount at mnt through
// fusectl (/sys/fs/fuse/connections/MINOR/abort, the minor of the mount's
// device): its daemon's reads end and it exits, although a private mount
// namespace (`run --branch`) still holds a bind of the mount. Best effort:
// without fusectl the lazy unmount alone is done.
func abortConnection(mnt string) {
	var st unix.Stat_t
	if unix.Stat(mnt, &st) != nil {
		return
	}
	p := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(st.Dev))
	os.WriteFile(p, []byte("1"), 0)
}

// stopBranchDaemon ends the branch daemon pid serving mnt that a
// discard --force unmounted but that still serves a private namespace's
// bind of its mount (without fusectl to abort the connection): SIGTERM,
// then SIGKILL after 5 s. Its state is about to be removed, so nothing of
// it needs saving. It signals pid only while its command line names mnt
// (a reused pid is left alone).
func stopBranchDaemon(pid int, mnt string) {
	if servesMount(pid, mnt) {
		unix.Kill(pid, unix.SIGTERM)
	}
	if !waitGone(pid, 5*time.Second) && servesMount(pid, mnt) {
		unix.Kill(pid, unix.SIGKILL)
	}
}

// servesMount reports whether process pid runs with mnt as an argument
// (the last of `rubinofs mount ... MERGED MNT`): a recorded daemon pid
// is trusted only while it does.
func servesMount(pid int, mnt string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(b), "\x00"+mnt)
}

// waitGone waits up to limit for process pid to exit (no /proc entry, or
// a zombie), polling every 5 ms; it reports whether it did.
func waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // polling for an exit with a deadline
	}
}
