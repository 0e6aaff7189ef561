package main

// mount(8) integration. Installed (or symlinked) as /sbin/mount.fuse.rubinofs,
// rubinofs is the helper mount(8) runs for `mount -t fuse.rubinofs` and for
// an /etc/fstab line of type fuse.rubinofs:
//
//	mount -t fuse.rubinofs /src/project /mnt/project -o allow_other,mode=warn
//	/src/project  /mnt/project  fuse.rubinofs  mode=warn,_netdev,nofail  0 0
//
// mount(8) calls the helper as `mount.fuse.rubinofs SOURCE TARGET [-sfnv]
// [-N NS] [-o OPTIONS] [-t TYPE]` (util-linux mount(8), "External helpers"),
// with SOURCE as written and TARGET canonicalised. fuse3's generic
// mount.fuse(8) instead runs the subtype's program from $PATH as `rubinofs
// SOURCE TARGET -o OPTIONS`; that form is recognised by its absolute first
// argument (no subcommand begins with '/'), as rclone recognises its own.
//
// Each option maps onto `rubinofs mount --daemon`, which returns once the
// mount answers, as mount(8) expects of a helper:
//   - an option named after a mount flag (dashes as underscores) sets it:
//     mode=warn, exempt=GLOB (repeatable), state_dir=/abs, unregistered=allow,
//     cache_timeout=10m, watch / nowatch, persist_reads / nopersist_reads, ...
//   - FUSE and kernel options go to -o: allow_other, ro, default_permissions,
//     [no]suid, [no]dev, [no]exec, sync, dirsync; rw and async are defaults;
//   - mount(8)'s and fstab's own options are ignored: defaults, auto, noauto,
//     user, nouser, users, owner, group, _netdev, nofail, comment=..., x-*
//     (x-systemd.*, x-gvfs-*), and the atime family (the backing filesystem
//     keeps the times);
//   - anything else is refused with exit status 32 (mount(8)'s "mount
//     failure") naming the known options, unless -s (sloppy) was given.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// Exit statuses of a mount helper, as mount(8) documents them.
const (
	mountExitUsage   = 1  // incorrect invocation or permissions
	mountExitFailure = 32 // mount failure
)

// mountHelperNames are the program names under which rubinofs acts as
// mount(8)'s helper.
var mountHelperNames = map[string]bool{"mount.fuse.rubinofs": true, "mount.rubinofs": true}

// isMountHelper reports whether args (os.Args) is a mount helper
// invocation: argv[0]'s base name is a helper name, or the first argument
// is an absolute path (fuse3's mount.fuse running `rubinofs SOURCE TARGET
// -o OPTS`).
func isMountHelper(args []string) bool {
	if len(args) == 0 {
		return false
	}
	if mountHelperNames[filepath.Base(args[0])] {
		return true
	}
	return len(args) >= 3 && strings.HasPrefix(args[1], "/")
}

// helperCall is one parsed mount helper invocation.
type helperCall struct {
	source, target string
	options        []string // every -o option, in order, split at commas
	fake           bool     // -f: parse and check, do not mount
	verbose        bool     // -v: say what is run
	sloppy         bool     // -s: ignore unknown options (with a warning)
}

// parseHelperArgs parses mount(8)'s calling convention. Errors are usage
// errors (mountExitUsage).
func parseHelperArgs(args []string) (helperCall, error) {
	var hc helperCall
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(args) {
				return hc, fmt.Errorf("%s needs an argument", a)
			}
			i++
			if err := hc.option(a[1], args[i]); err != nil {
				return hc, err
			}
		case strings.HasPrefix(a, "-o") || strings.HasPrefix(a, "-t") || strings.HasPrefix(a, "-N"):
			if err := hc.option(a[1], a[2:]); err != nil {
				return hc, err
			}
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			for _, c := range a[1:] {
				switch c {
				case 's':
					hc.sloppy = true
				case 'f':
					hc.fake = true
				case 'v':
					hc.verbose = true
				case 'n': // no /etc/mtab: rubinofs never writes it
				case 'r':
					hc.options = append(hc.options, "ro")
				case 'w':
					hc.options = append(hc.options, "rw")
				default:
					return hc, fmt.Errorf("unknown flag -%c (mount helper flags: -o OPTIONS, -s, -f, -n, -v, -t TYPE)", c)
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return hc, fmt.Errorf("usage: mount.fuse.rubinofs WORKSPACE MOUNTPOINT [-o OPTIONS] [-s] [-f] [-n] [-v] (got %d arguments)", len(pos))
	}
	hc.source, hc.target = pos[0], pos[1]
	return hc, nil
}

func (hc *helperCall) option(flag byte, v string) error {
	switch flag {
	case 'o':
		hc.options = append(hc.options, splitMountOptions(v)...)
	case 't':
		// fuse.rubinofs, or rubinofs when called as mount.rubinofs.
		if v != "rubinofs" && !strings.HasSuffix(v, ".rubinofs") {
			return fmt.Errorf("file system type %q is not rubinofs (use -t fuse.rubinofs)", v)
		}
	case 'N':
		// Go cannot enter another mount namespace (setns(CLONE_NEWNS)
		// is refused for a multithreaded process).
		return fmt.Errorf("mount --namespace is not supported: run mount inside the namespace (nsenter -m)")
	}
	return nil
}

// splitMountOptions splits an -o string at commas outside double quotes
// (libmount's quoting: exempt="{a,b}/**") and drops the quotes.
func splitMountOptions(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	out = append(out, cur.String())
	kept := out[:0]
	for _, o := range out {
		if o != "" {
			kept = append(kept, o)
		}
	}
	return kept
}

// helperFuseOptions are passed to the kernel through `mount -o`.
var helperFuseOptions = map[string]bool{
	"allow_other": true, "ro": true, "default_permissions": true,
	"suid": true, "nosuid": true, "dev": true, "nodev": true, "exec": true, "noexec": true,
	"sync": true, "dirsync": true,
}

// helperDefaultOptions are the defaults anyway: dropped.
var helperDefaultOptions = map[string]bool{"rw": true, "async": true}

// helperIgnoredOptions are mount(8)'s, fstab's and systemd's own options,
// and the access-time options (the backing filesystem keeps the times); the
// prefixes x- and X- and the key comment= are ignored too.
var helperIgnoredOptions = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "user": true, "nouser": true, "users": true,
	"owner": true, "group": true, "_netdev": true, "nofail": true,
	"atime": true, "noatime": true, "relatime": true, "norelatime": true, "strictatime": true,
	"nostrictatime": true, "diratime": true, "nodiratime": true, "lazytime": true, "nolazytime": true,
}

// helperSkipFlags are mount flags no option may set: the helper always
// daemonises, decides --in-place from SOURCE == TARGET and builds -o itself.
var helperSkipFlags = map[string]bool{"daemon": true, "in-place": true, "o": true, "help": true}

// mountFlagsByOption indexes the mount command's flags by option name
// (dashes as underscores): every flag a later change adds is an option too.
func mountFlagsByOption() map[string]cli.Flag {
	m := map[string]cli.Flag{}
	for _, f := range mountFlags() {
		for _, n := range f.Names() {
			if !helperSkipFlags[n] && len(n) > 1 {
				m[strings.ReplaceAll(n, "-", "_")] = f
			}
		}
	}
	return m
}

// knownMountOptions lists every option the helper accepts, for the error
// about an unknown one.
func knownMountOptions() string {
	var names []string
	for n, f := range mountFlagsByOption() {
		if tv, ok := f.(interface{ TakesValue() bool }); ok && tv.TakesValue() {
			names = append(names, n+"=")
		} else {
			names = append(names, n, "no"+n)
		}
	}
	for n := range helperFuseOptions {
		names = append(names, n)
	}
	for n := range helperDefaultOptions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ") + "; ignored: defaults, auto, noauto, user(s), _netdev, nofail, comment=, x-*, atime options"
}

// errUnknownOption is an option the helper does not know (exit 32).
type errUnknownOption struct{ name string }

func (e errUnknownOption) Error() string {
	return fmt.Sprintf("unknown mount option %q (known: %s)", e.name, knownMountOptions())
}

// mountArgsFromOptions maps mount options onto `rubinofs mount` arguments:
// flags first, then one -o with the FUSE options. ignored lists what was
// dropped on purpose; with sloppy an unknown option is ignored too (and
// listed in unknown), otherwise it is an errUnknownOption.
func mountArgsFromOptions(opts []string, sloppy bool) (args, ignored, unknown []string, err error) {
	byName := mountFlagsByOption()
	var fuseOpts []string
	for _, o := range opts {
		key, val, hasVal := strings.Cut(o, "=")
		switch {
		case helperFuseOptions[o]:
			fuseOpts = append(fuseOpts, o)
			continue
		case helperDefaultOptions[o], helperIgnoredOptions[o],
			strings.HasPrefix(o, "x-"), strings.HasPrefix(o, "X-"), key == "comment":
			ignored = append(ignored, o)
			continue
		}
		f, ok := byName[key]
		negated := false
		if !ok && !hasVal && strings.HasPrefix(key, "no") {
			if g, ok2 := byName[strings.TrimPrefix(key, "no")]; ok2 {
				f, ok, negated = g, true, true
			}
		}
		if !ok {
			if sloppy {
				unknown = append(unknown, o)
				continue
			}
			return nil, nil, nil, errUnknownOption{o}
		}
		name := "--" + f.Names()[0]
		takesValue := false
		if tv, ok := f.(interface{ TakesValue() bool }); ok {
			takesValue = tv.TakesValue()
		}
		switch {
		case takesValue && negated:
			return nil, nil, nil, fmt.Errorf("mount option %q: %s takes a value (%s=VALUE)", o, key[2:], key[2:])
		case takesValue && !hasVal:
			return nil, nil, nil, fmt.Errorf("mount option %q needs a value (%s=VALUE)", o, key)
		case takesValue:
			args = append(args, name+"="+val)
		case negated:
			args = append(args, name+"=false")
		case hasVal:
			args = append(args, name+"="+val) // watch=false
		default:
			args = append(args, name)
		}
	}
	if len(fuseOpts) > 0 {
		args = append(args, "-o", strings.Join(fuseOpts, ","))
	}
	return args, ignored, unknown, nil
}

// mountHelperMain runs one mount helper invocation (args without argv[0])
// and returns the exit status for mount(8): 0 once the mount answers,
// mountExitUsage for a malformed call, mountExitFailure for an unknown
// option or a failed mount.
func mountHelperMain(args []string) int {
	hc, err := parseHelperArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rubinofs:", err)
		return mountExitUsage
	}
	flags, ignored, unknown, err := mountArgsFromOptions(hc.options, hc.sloppy)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rubinofs:", err)
		return mountExitFailure
	}
	if len(unknown) > 0 {
		fmt.Fprintf(os.Stderr, "rubinofs: ignoring unknown mount options (sloppy): %s\n", strings.Join(unknown, ","))
	}
	source, err := filepath.Abs(hc.source)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rubinofs:", err)
		return mountExitFailure
	}
	target, err := filepath.Abs(hc.target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rubinofs:", err)
		return mountExitFailure
	}
	argv := append([]string{"rubinofs", "mount", "--daemon"}, flags...)
	if source == target {
		argv = append(argv, "--in-place", source)
	} else {
		argv = append(argv, source, target)
	}
	if hc.verbose {
		if len(ignored) > 0 {
			fmt.Fprintf(os.Stderr, "rubinofs: ignoring mount(8)'s options: %s\n", strings.Join(ignored, ","))
		}
		fmt.Fprintf(os.Stderr, "rubinofs: running: %s\n", strings.Join(argv, " "))
	}
	if hc.fake {
		return 0
	}
	// spawnDaemon rebuilds the daemon's arguments from mountArgv.
	mountArgv = argv
	if !hc.verbose {
		// mount(8)'s helpers are silent on success.
		if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			defer null.Close()
			stdout := os.Stdout
			os.Stdout = null
			defer func() { os.Stdout = stdout }()
		}
	}
	app := newApp()
	usageErrors(app)
	if err := app.Run(argv); err != nil {
		if line := errorLine(err); line != "" {
			fmt.Fprintln(os.Stderr, line)
		}
		if ec, ok := err.(cli.ExitCoder); ok && ec.ExitCode() == 2 {
			return mountExitUsage
		}
		return mountExitFailure
	}
	return 0
}
