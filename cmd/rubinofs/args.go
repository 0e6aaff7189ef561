package main

// Command-line conventions urfave/cli/v2 does not follow by itself, made to
// match sshfs, rclone and gocryptfs:
//
//   - Flags may follow the positional arguments (`rubinofs mount WS MNT
//     --daemon`): interspersed reorders the words before parsing. A word
//     after `--` is positional whatever it looks like, and `rubinofs run`
//     passes everything from CMD on to CMD untouched (as env, sudo and
//     timeout do), so CMD's own flags stay CMD's.
//   - A usage error (an unknown flag, a bad or missing flag value) is one
//     line on stderr naming the option and what to write instead, and exit
//     status 2, instead of urfave's whole help text (usageErrors).

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/config"
)

// exitUsage is the exit status of a usage error (a bad flag, a missing or
// extra argument), as in sshfs, rclone and most of coreutils.
const exitUsage = 2

// passThrough names the commands whose arguments from the first positional
// on belong to another program: no flag is taken from among them.
var passThrough = map[string]bool{"run": true}

// interspersed returns args (os.Args) with the flags of the (sub)command
// they name moved before its positional arguments, followed by `--` when a
// positional argument starts with "-" (it came after a `--`). A flag's
// separate value moves with it: a word is a flag's value when the flag is
// known to take one (cli.DocGenerationFlag.TakesValue) and was written
// without "=". Unknown flags move too, so that the parser reports them.
// args is returned unchanged for shell completion (urfave's
// --generate-bash-completion must stay last) and for a word that names no
// command.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	// The app's own flags (--help, --version) take no value.
	for len(rest) > 0 && isFlagWord(rest[0]) {
		out, rest = append(out, rest[0]), rest[1:]
	}
	if len(rest) == 0 {
		return args
	}
	cmd := findCommand(app.Commands, rest[0])
	if cmd == nil {
		return args
	}
	out, rest = append(out, rest[0]), rest[1:]
	var flags, pos []string
	dashdash := false
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		switch {
		case w == "--":
			dashdash = true
			pos = append(pos, rest[i+1:]...)
			i = len(rest)
		case isFlagWord(w) && !(passThrough[cmd.Name] && len(pos) > 0):
			flags = append(flags, w)
			if !strings.Contains(w, "=") && takesValue(cmd, w) && i+1 < len(rest) {
				i++
				flags = append(flags, rest[i])
			}
		case len(pos) == 0 && len(cmd.Subcommands) > 0 && findCommand(cmd.Subcommands, w) != nil:
			// The subcommand: the flags so far are its parent's.
			out = append(append(out, flags...), w)
			cmd, rest = findCommand(cmd.Subcommands, w), rest[i+1:]
			flags = nil
			i = -1
		case passThrough[cmd.Name] && len(pos) == 0:
			pos = append(pos, rest[i:]...)
			i = len(rest)
		default:
			pos = append(pos, w)
		}
	}
	out = append(out, flags...)
	if dashdash || startsWithDash(pos) {
		out = append(out, "--")
	}
	return append(out, pos...)
}

// isFlagWord reports whether w is written as a flag: a dash and more, but
// neither "-" (stdin, by convention) nor "--".
func isFlagWord(w string) bool { return len(w) > 1 && w[0] == '-' && w != "--" }

// startsWithDash reports whether a word of ws other than "-" starts with a
// dash: the parser would take it for a flag without a `--` before it.
func startsWithDash(ws []string) bool {
	for _, w := range ws {
		if strings.HasPrefix(w, "-") && w != "-" {
			return true
		}
	}
	return false
}

// findCommand returns the command named (or aliased) name, or nil.
func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// lookupFlag returns cmd's flag named by the word w ("-o", "--mount",
// "--mount=DIR"), or nil.
func lookupFlag(cmd *cli.Command, w string) cli.Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// takesValue reports whether the flag w of cmd takes a value (a string,
// duration, number... flag; not a bool flag).
func takesValue(cmd *cli.Command, w string) bool {
	tv, ok := lookupFlag(cmd, w).(cli.DocGenerationFlag)
	return ok && tv.TakesValue()
}

// flag package errors, as urfave/cli passes them to OnUsageError.
var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	reNeedsArg  = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
	reBadValue  = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]+): (.*)$`)
)

// flagName writes name as the user would: "-o" for a one-letter name,
// "--name" otherwise.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// usageError turns a flag-parsing error of command path (e.g. "rubinofs
// mount") into the one-line message printed for it: the option, what is
// wrong, what to write instead, and where the help is.
func usageError(cmd *cli.Command, path string, err error) string {
	help := fmt.Sprintf("see '%s --help'", path)
	msg := err.Error()
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s: unknown flag %s; %s", path, flagName(m[1]), help)
	}
	if m := reNeedsArg.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s: %s needs a value; %s", path, flagName(m[1]), help)
	}
	if m := reBadValue.FindStringSubmatch(msg); m != nil {
		val, name := m[1], m[2]
		var f cli.Flag
		if cmd != nil {
			f = lookupFlag(cmd, name)
		}
		switch f.(type) {
		case *cli.DurationFlag:
			return fmt.Sprintf("%s: %s %q is not a duration: %s", path, flagName(name), val, config.DurationHint(val))
		case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
			return fmt.Sprintf("%s: %s %q is not a whole number; %s", path, flagName(name), val, help)
		case *cli.BoolFlag:
			return fmt.Sprintf("%s: %s=%s: a switch is true or false (or given alone); %s", path, flagName(name), val, help)
		}
		return fmt.Sprintf("%s: %s %q: %s; %s", path, flagName(name), val, m[3], help)
	}
	return fmt.Sprintf("%s: %s; %s", path, msg, help)
}

// usageErrors installs the one-line usage errors (usageError, exit 2) on
// the app and on every command under it.
func usageErrors(app *cli.App) {
	app.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return cli.Exit(usageError(nil, app.Name, err), exitUsage)
	}
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd := cmd
			p := path + " " + cmd.Name
			cmd.OnUsageError = func(c *cli.Context, err error, _ bool) error {
				return cli.Exit(usageError(cmd, p, err), exitUsage)
			}
			walk(p, cmd.Subcommands)
		}
	}
	walk(app.Name, app.Commands)
}

// unknownCommand returns the usage error for a command or subcommand word
// in args (os.Args) that names none, or "" when every command word is
// known (or there is none: urfave prints the help then).
func unknownCommand(app *cli.App, args []string) string {
	rest := args[1:]
	for len(rest) > 0 && isFlagWord(rest[0]) {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] == "help" || rest[0] == "h" {
		return ""
	}
	cmds, path := app.Commands, app.Name
	for len(rest) > 0 {
		cmd := findCommand(cmds, rest[0])
		if cmd == nil {
			return fmt.Sprintf("%s: unknown command %q; see '%s --help'", path, rest[0], path)
		}
		path += " " + cmd.Name
		if len(cmd.Subcommands) == 0 {
			return ""
		}
		rest = rest[1:]
		for len(rest) > 0 && isFlagWord(rest[0]) {
			if !strings.Contains(rest[0], "=") && takesValue(cmd, rest[0]) {
				rest = rest[1:]
			}
			rest = rest[1:]
		}
		if len(rest) == 0 || rest[0] == "help" || rest[0] == "h" {
			return ""
		}
		cmds = cmd.Subcommands
	}
	return ""
}
