// Command rubinofs mounts an agent's workspace through a FUSE file system
// that enforces read-before-write per session, and drives the mount's control
// tree (/.rubino) from the shell. Every subcommand after `mount` works only
// through the control files, so it also works inside a container that sees
// nothing but the mount.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is the release version, used when the build carries no module
// version of its own (a build from a checkout: "(devel)").
const version = "v0.1.0"

// pseudoVersion matches a Go pseudo-version's timestamp-revision suffix
// (v0.0.0-20240102150405-0123456789ab): the commit says more.
var pseudoVersion = regexp.MustCompile(`[-.][0-9]{14}-[0-9a-f]{12}`)

// versionString is the one version line of `rubinofs version`,
// `rubinofs --version` and .rubino/status: the module version, the VCS
// revision it was built from (12 hex digits, "-dirty" for a build with
// uncommitted changes) and the Go release, e.g. "v0.1.0 (commit
// 0123456789ab, go1.26.1)". The commit is "unknown" when the build has no
// VCS information (built outside a checkout, or with -buildvcs=false).
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi, runtime.Version())
}

// versionOf is versionString for the build information bi (nil: none) of
// a binary built by Go release goVer.
func versionOf(bi *debug.BuildInfo, goVer string) string {
	v, commit := version, "unknown"
	if bi != nil {
		if mv := bi.Main.Version; mv != "" && mv != "(devel)" && !pseudoVersion.MatchString(mv) {
			v = strings.TrimSuffix(mv, "+dirty")
		}
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			commit = rev
			if dirty {
				commit += "-dirty"
			}
		}
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, commit, goVer)
}

func newApp() *cli.App {
	return &cli.App{
		Name:                 "rubinofs",
		Usage:                "a FUSE workspace for coding agents that refuses blind writes",
		Version:              versionString(),
		EnableBashCompletion: true,
		// Errors come back from Run: main prints them, once, as
		// "rubinofs: MESSAGE" (urfave would print and exit itself).
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			mountCommand(),
			unmountCommand(),
			statusCommand(),
			runCommand(),
			checkpointCommand(),
			checkpointsCommand(),
			changesCommand(),
			diffCommand(),
			rewindCommand(),
			sessionCommand(),
			hookCommand(),
			setupCommand(),
			agentCommand(),
			compactCommand(),
			agentsCommand(),
			askCommand(),
			inboxCommand(),
			demoCommand(),
			configCommand(),
			policyCommand(),
			denialsCommand(),
			readCommand(),
			doctorCommand(),
			stateCommand(),
			completionCommand(),
			mcpCommand(),
			branchCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					printVersion(c)
					return nil
				},
			},
		},
	}
}

// printVersion prints the version line (versionString) for `rubinofs
// version` and `rubinofs --version` alike.
func printVersion(c *cli.Context) {
	fmt.Fprintln(c.App.Writer, "rubinofs", versionString())
}

func main() {
	if mode, ok := isProbeChild(os.Args); ok { // findMount's or unmount's probe (probe.go)
		os.Exit(probeChildMain(mode, os.Args[1:], os.Stdout))
	}
	// Called as mount(8)'s helper (mount.fuse.rubinofs, or by fuse3's
	// mount.fuse as `rubinofs /WORKSPACE MNT -o OPTS`): mount(8)'s calling
	// convention and exit codes (mounthelper.go).
	if isMountHelper(os.Args) {
		os.Exit(mountHelperMain(os.Args[1:]))
	}
	os.Exit(run(os.Args, os.Stderr))
}

// errorLine is err as printed: "rubinofs: MESSAGE", or the message alone
// when it already names the command ("rubinofs mount: ..."); "" for an
// error without a message (an exit status alone).
func errorLine(err error) string {
	msg := err.Error()
	if msg != "" && !strings.HasPrefix(msg, "rubinofs") {
		msg = "rubinofs: " + msg
	}
	return msg
}

// run runs the CLI on args (os.Args) and returns the exit status, with
// the error, if any, printed on stderr as one line "rubinofs: MESSAGE": 0,
// 1 for a failure, 2 for a usage error (exitUsage), or the status an
// ExitCoder carries.
func run(args []string, stderr io.Writer) int {
	cli.VersionPrinter = printVersion
	app := newApp()
	usageErrors(app) // args.go: one-line usage errors
	if msg := unknownCommand(app, args); msg != "" {
		fmt.Fprintln(stderr, msg)
		return exitUsage
	}
	args = interspersed(app, watchModeArgs(args)) // watchflag.go
	mountArgv = args
	err := app.Run(args)
	if err == nil {
		return 0
	}
	if line := errorLine(err); line != "" {
		fmt.Fprintln(stderr, line)
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}
