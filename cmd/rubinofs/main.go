// Command rubinofs mounts an agent's workspace through a FUSE file system
// that enforces read-before-write per session, and drives the mount's control
// tree (/.rubino) from the shell. Every subcommand after `mount` works only
// through the control files, so it also works inside a container that sees
// nothing but the mount.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is the release version; the VCS revision is appended when known.
const version = "0.1.0"

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}

func newApp() *cli.App {
	return &cli.App{
		Name:                 "rubinofs",
		Usage:                "a FUSE workspace for coding agents that refuses blind writes",
		Version:              versionString(),
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			mountCommand(),
			unmountCommand(),
			statusCommand(),
			runCommand(),
			compactCommand(),
			agentsCommand(),
			askCommand(),
			inboxCommand(),
			demoCommand(),
			configCommand(),
			doctorCommand(),
			completionCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Println("rubinofs", versionString())
					return nil
				},
			},
		},
	}
}

func main() {
	// Called as mount(8)'s helper (mount.fuse.rubinofs, or by fuse3's
	// mount.fuse as `rubinofs /WORKSPACE MNT -o OPTS`): mount(8)'s calling
	// convention and exit codes (mounthelper.go).
	if isMountHelper(os.Args) {
		os.Exit(mountHelperMain(os.Args[1:]))
	}
	if err := newApp().Run(os.Args); err != nil {
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			if msg := err.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, "rubinofs:", msg)
			}
			os.Exit(ec.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "rubinofs:", err)
		os.Exit(1)
	}
}
