package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/guard"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "a self-contained tour: mount a temp workspace, refuse a blind write, allow a read-then-edit",
		Action: func(c *cli.Context) error {
			return runDemo(os.Stdout)
		},
	}
}

// runDemo mounts a temporary workspace, runs real shell commands through the
// mount, prints what the guard did and unmounts. Commands run with their
// working directory outside the mount and `cd` in the shell: a process that
// forks with its cwd inside a mount served by the same process can deadlock
// (golang/go#11155).
func runDemo(out io.Writer) error {
	tmp, err := os.MkdirTemp("", "rubinofs-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ws, mnt := filepath.Join(tmp, "workspace"), filepath.Join(tmp, "mnt")
	for _, d := range []string{ws, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"notes.txt":   "remember: the cache key includes the tenant\n",
		"src/main.go": "package main\n\nfunc main() { println(\"hello\") }\n",
		".gitignore":  "build/\n",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	d, err := daemon.Start(daemon.Config{
		Workspace: ws, Mountpoint: mnt, Guard: config.Guard{Mode: guard.ModeEnforce},
		StateDir: filepath.Join(tmp, "state"), Cache: config.Cache{CacheTimeout: time.Hour, Watch: true},
		Version: versionString(), Slog: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("demo mount: %w", err)
	}
	defer d.Close()

	fmt.Fprintf(out, "rubinofs demo: workspace %s mounted at %s (guard: enforce)\n\n", ws, mnt)
	step := func(title, script string) {
		fmt.Fprintf(out, "## %s\n$ %s\n", title, script)
		cmd := exec.Command("/bin/sh", "-c", "cd "+shellQuote(mnt)+" && "+script)
		cmd.Dir = tmp
		b, err := cmd.CombinedOutput()
		text := strings.TrimRight(string(b), "\n")
		if text != "" {
			fmt.Fprintln(out, indent(text))
		}
		if err != nil {
			fmt.Fprintf(out, "   -> refused (%v)\n\n", err)
		} else {
			fmt.Fprintf(out, "   -> ok\n\n")
		}
	}
	step("A blind overwrite of a file this session never read is refused", "echo 'rewritten from memory' > notes.txt")
	step("The file is intact", "cat notes.txt")
	step("Having read it (the cat above), an edit is allowed", "echo 'and the region' >> notes.txt && cat notes.txt")
	step("sed -i after a read: allowed (it writes a temp file and renames it over)", "cat src/main.go >/dev/null && sed -i 's/hello/hello, agent/' src/main.go && cat src/main.go")
	step("A file changed outside the mount is stale until read again",
		"echo 'edited by a human' >> "+shellQuote(filepath.Join(ws, "notes.txt"))+" && /bin/echo 'agent edit' >> notes.txt")
	step("New files and ignored paths are always allowed", "mkdir -p build && echo out > build/app && echo new > fresh.txt && ls")
	step("Why was I refused?", "cat .rubino/guard/why")
	step("The denial log", "cat .rubino/guard/denials")
	if err := d.Close(); err != nil {
		return err
	}
	fmt.Fprintln(out, "unmounted; the demo workspace is removed.")
	return nil
}

func indent(s string) string {
	return "   " + strings.ReplaceAll(s, "\n", "\n   ")
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
