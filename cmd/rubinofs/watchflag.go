package main

import "strings"

// watchModeArgs rewrites the mount command's --watch=MODE, for MODE auto,
// inotify, poll or off, into the switch and the mode it sets:
// --watch=true --watch-mode=MODE, or --watch=false for off
// (docs/multihost.md). --watch, --watch=true and --watch=false keep their
// meaning (true is auto). Words after `--`, and every command but mount,
// are left as they are.
func watchModeArgs(args []string) []string {
	cmd := -1
	for i := 1; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "-") {
			cmd = i
			break
		}
	}
	if cmd < 0 || args[cmd] != "mount" {
		return args
	}
	out := append([]string(nil), args[:cmd+1]...)
	for i := cmd + 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		v, ok := strings.CutPrefix(a, "--watch=")
		if !ok {
			v, ok = strings.CutPrefix(a, "-watch=")
		}
		switch {
		case !ok:
			out = append(out, a)
		case v == "auto" || v == "inotify" || v == "poll":
			out = append(out, "--watch=true", "--watch-mode="+v)
		case v == "off":
			out = append(out, "--watch=false")
		default:
			out = append(out, a)
		}
	}
	return out
}
