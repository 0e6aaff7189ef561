package main

// The Read tool (docs/DESIGN.md#read-tool): `rubinofs read` and the MCP
// server's `read` tool. It reads a file through the mount with plain
// read(2) (ctlio.go says why never through Go's poller), shows its lines
// numbered as `cat -n` does, and asks the caller's own session, through
// .rubino/self/readtool, whether the window is one the model already has
// ("unchanged"), whether it drills into a range a skeleton elided (always
// the bytes), and for a whole-file read declares the read with the hash
// of the bytes shown. A file over the limit is shown as a skeleton.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/sessionctl"
)

// Limits of the Read tool (docs/DESIGN.md#read-tool).
const (
	// readToolMaxLines is the most lines the tool shows at once: a
	// whole-file read of a longer file is shown as a skeleton, and a
	// window is cut after this many lines. `rubinofs read --max` sets it.
	readToolMaxLines = 2000
	// readToolMaxBytes is the most bytes the tool shows at once: a
	// whole-file read of a larger file is shown as a skeleton, and a
	// window is cut at the line that would pass it.
	readToolMaxBytes = 256 << 10
	// readToolMaxFile is the largest file the tool reads at all, in
	// bytes: it holds the file in memory to number, hash and outline it.
	readToolMaxFile = 64 << 20
	// readToolMaxLine is the longest line a skeleton shows, in bytes;
	// longer ones are clipped with a note.
	readToolMaxLine = 2000
	// readToolMinElide is the shortest run of indented lines a skeleton
	// elides: a shorter run costs less to show than its marker.
	readToolMinElide = 2
)

// readToolInput: the Read tool's arguments (JSON names are the MCP tool's).
type readToolInput struct {
	Path   string `json:"path" jsonschema:"file to read, absolute or relative to the working directory, inside the mount"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to show, 1-based (0: from the start)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"lines to show (0: all, or a skeleton when the file is over the size limit)"`
}

// readTool runs the Read tool for the caller's session on the mount mnt and returns the text the model is shown.
//
// mnt is the mount root (findMount). The text is the window's lines
// numbered as `cat -n` numbers them; or one line saying the window is
// unchanged since the session's last read of it; or, for a whole-file
// read of a file over readToolMaxLines or readToolMaxBytes, a skeleton
// with its elided ranges marked. An error is one readable line (the MCP
// server shows it as the tool's error): bad arguments, a path outside the
// mount, a missing file, a directory, a binary or oversized file, or the
// daemon's reason for refusing the request. Not safe for concurrent use
// with a change of the process's working directory.
func readTool(mnt string, in readToolInput) (string, error) {
	return readToolMax(mnt, in, readToolMaxLines)
}

// readToolMax is readTool with maxLines in place of readToolMaxLines.
func readToolMax(mnt string, in readToolInput, maxLines int) (string, error) {
	switch {
	case in.Path == "":
		return "", errors.New("path is empty: give the file to read")
	case in.Offset < 0:
		return "", fmt.Errorf("offset %d: must be 0 or more (a 1-based line number; 0 reads from the start)", in.Offset)
	case in.Limit < 0:
		return "", fmt.Errorf("limit %d: must be 0 or more (a number of lines; 0 reads to the end)", in.Limit)
	case maxLines < 1:
		return "", fmt.Errorf("max %d: must be 1 or more (lines shown at once)", maxLines)
	}
	real, sendPath, err := readToolPath(mnt, in.Path)
	if err != nil {
		return "", err
	}
	content, err := readWhole(real, in.Path)
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(content, 0) >= 0 {
		return "", fmt.Errorf("%s looks binary (it holds NUL bytes): the read tool shows text", in.Path)
	}
	hash := guard.HashBytes(content).String()
	lines := splitLines(content)
	ask := func(req string) (string, error) {
		ans, err := cloneCtl(mnt, "self/readtool", []byte(req+" "+hash+"\n"))
		if err != nil {
			return "", readToolCtlError(err)
		}
		return ans, nil
	}
	if in.Offset <= 1 && in.Limit == 0 {
		if len(lines) > maxLines || len(content) > readToolMaxBytes {
			return readSkeleton(in.Path, sendPath, lines, len(content), maxLines, ask)
		}
		ans, err := ask("window " + quoteToken(sendPath) + " 0 0")
		if err != nil {
			return "", err
		}
		if ans == "dup" {
			return fmt.Sprintf("unchanged since your last read of %s (all %d lines, same bytes): use that\n", in.Path, len(lines)), nil
		}
		if len(lines) == 0 {
			return fmt.Sprintf("%s is empty (0 lines)\n", in.Path), nil
		}
		return numbered(lines, 1, len(lines)), nil
	}
	first := max(in.Offset, 1)
	if first > len(lines) {
		return "", fmt.Errorf("offset %d is past the end of %s, which has %s", in.Offset, in.Path, plural(len(lines), "line"))
	}
	last := len(lines)
	if in.Limit > 0 {
		last = min(last, first+in.Limit-1)
	}
	// Cut the window at the limit, keeping at least one line.
	cut := first
	for size := len(lines[first-1]); cut < last && cut-first+1 < maxLines; cut++ {
		if size += len(lines[cut]) + 1; size > readToolMaxBytes {
			break
		}
	}
	ans, err := ask(fmt.Sprintf("window %s %d %d", quoteToken(sendPath), first, cut-first+1))
	if err != nil {
		return "", err
	}
	if ans == "dup" {
		return fmt.Sprintf("unchanged since your last read of lines %d-%d of %s (same bytes): use that\n", first, cut, in.Path), nil
	}
	out := numbered(lines, first, cut)
	if cut < last {
		out += fmt.Sprintf("… stopped at line %d of %d (the read tool shows at most %d lines or %d KiB at once): read on with offset %d\n",
			cut, len(lines), maxLines, readToolMaxBytes>>10, cut+1)
	}
	return out, nil
}

// readToolPath resolves p (absolute, or relative to the working
// directory) to the file it names with symlinks resolved (real), and the
// path to send the daemon: relative to the working directory when that
// is inside the mount (it then means the same in a container, whose
// paths the daemon does not share), else absolute. A path outside the
// mount, or inside its control tree, is an error.
func readToolPath(mnt, p string) (real, send string, err error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("the working directory: %v", err)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, abs)
	}
	realMnt := mnt
	if r, err := filepath.EvalSymlinks(mnt); err == nil {
		realMnt = r
	}
	inside := func(q string) bool {
		return inMount(mnt, q) || inMount(realMnt, q)
	}
	if !inside(abs) {
		return "", "", fmt.Errorf("%s is outside the mount %s: the read tool reads files inside it", p, mnt)
	}
	real, err = filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%s: no such file", p)
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: %v", p, unwrapPathErr(err))
	}
	if !inMount(realMnt, real) {
		return "", "", fmt.Errorf("%s resolves to %s, outside the mount %s: the read tool reads files inside it", p, real, mnt)
	}
	if rel, _ := filepath.Rel(realMnt, real); rel == ctltree.DirName || strings.HasPrefix(rel, ctltree.DirName+"/") {
		return "", "", fmt.Errorf("%s is a control file of the mount, not a workspace file", p)
	}
	send = real
	if rc, err := filepath.EvalSymlinks(cwd); err == nil && inMount(realMnt, rc) {
		if rel, err := filepath.Rel(rc, real); err == nil {
			send = rel
		}
	}
	return real, send, nil
}

// readWhole reads the regular file real with plain read(2) calls (never
// Go's poller), refusing a directory, a special file and one over
// readToolMaxFile; errors name the file as the caller did (shown).
func readWhole(real, shown string) ([]byte, error) {
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(real, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		if err == unix.ENOENT {
			return nil, fmt.Errorf("%s: no such file", shown)
		}
		return nil, fmt.Errorf("%s: %v", shown, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %v", shown, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return nil, fmt.Errorf("%s is a directory, not a file: list it with ls", shown)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("%s is not a regular file", shown)
	case st.Size > readToolMaxFile:
		return nil, fmt.Errorf("%s is %d MiB, over the %d MiB the read tool reads: look at it with head, tail or grep", shown, st.Size>>20, readToolMaxFile>>20)
	}
	buf := make([]byte, 0, st.Size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", shown, err)
		}
		if n == 0 {
			return buf, nil
		}
		if buf = buf[:len(buf)+n]; len(buf) > readToolMaxFile {
			return nil, fmt.Errorf("%s grew past the %d MiB the read tool reads: look at it with head, tail or grep", shown, readToolMaxFile>>20)
		}
	}
}

// unwrapPathErr drops the path an *fs.PathError repeats.
func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readToolCtlError says what a failed readtool request means: a mount
// without the file (a caller whose session the mount could not tell, or
// an older rubinofs), or the daemon's reason.
func readToolCtlError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "open" && errors.Is(err, fs.ErrNotExist) {
		return errors.New("the mount has no .rubino/self/readtool for this process: its session could not be told (try again), or the mount's rubinofs is older than this one (remount with this version)")
	}
	var ce *ctlError
	if errors.As(err, &ce) && ce.Reason != "" {
		return fmt.Errorf("%s (%s)", ce.Reason, ce.Errno)
	}
	return err
}

// plural is "1 line", "2 lines".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// splitLines splits content into lines without their '\n'; a last line
// without one counts, an empty content has none.
func splitLines(content []byte) []string {
	if len(content) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(content), "\n")
	return strings.Split(s, "\n")
}

// numbered renders lines first..last (1-based) as `cat -n` does. A line
// over readToolMaxBytes (a window's first line: the window stops before
// any other that would pass it, and a whole file shown is under it) is
// clipped there, with a note.
func numbered(lines []string, first, last int) string {
	var b strings.Builder
	for n := first; n <= last; n++ {
		line := lines[n-1]
		if len(line) > readToolMaxBytes {
			line = fmt.Sprintf("%s… (%d more bytes of this line, past the read tool's %d KiB: see them with cut or dd)", line[:readToolMaxBytes], len(line)-readToolMaxBytes, readToolMaxBytes>>10)
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, line)
	}
	return b.String()
}

// indented reports whether a line is indented (starts with a space or a
// tab) or blank: the lines a skeleton may elide.
func indented(line string) bool {
	return strings.TrimSpace(line) == "" || line[0] == ' ' || line[0] == '\t'
}

// skeletonRanges returns the ranges a skeleton of lines elides
// (docs/DESIGN.md#read-tool): in each run of indented or blank lines that
// follows a line with no indentation, every line after the run's first,
// when they are readToolMinElide or more (trailing blank lines of a run
// are kept: they separate what follows). Then the outline is cut so it
// shows at most maxLines/2 lines and readToolMaxBytes/2 bytes, and has
// fewer than sessionctl.MaxSkeletonRanges ranges: everything after the cut
// is one last range to the end.
func skeletonRanges(lines []string, maxLines int) []guard.Range {
	var rs []guard.Range
	for i := 0; i < len(lines); {
		if indented(lines[i]) {
			i++ // a top-level blank line, or an indented first line of the file
			continue
		}
		j := i + 1
		if j < len(lines) && indented(lines[j]) {
			k := j + 1
			for k < len(lines) && indented(lines[k]) {
				k++
			}
			end := k // the run is lines[j:k]; keep its trailing blank lines
			for end > j+1 && strings.TrimSpace(lines[end-1]) == "" {
				end--
			}
			if n := end - (j + 1); n >= readToolMinElide {
				rs = append(rs, guard.Range{First: int64(j + 2), Count: int64(n)})
			}
			j = k
		}
		i = j
	}
	// The cut: walk the shown lines, counting.
	shownLines, shownBytes, ri := 0, 0, 0
	for n := 1; n <= len(lines); n++ {
		if ri < len(rs) && int64(n) == rs[ri].First {
			n += int(rs[ri].Count) - 1
			ri++
			continue
		}
		shownLines++
		shownBytes += min(len(lines[n-1]), readToolMaxLine) + 8
		if shownLines > max(maxLines/2, 1) || shownBytes > readToolMaxBytes/2 || ri >= sessionctl.MaxSkeletonRanges-1 {
			rs = rs[:ri]
			if k := len(rs) - 1; k >= 0 && rs[k].First+rs[k].Count == int64(n) {
				rs[k].Count = int64(len(lines)) - rs[k].First + 1
			} else {
				rs = append(rs, guard.Range{First: int64(n), Count: int64(len(lines) - n + 1)})
			}
			break
		}
	}
	return rs
}

// readSkeleton shows the skeleton of a file over the limit, after
// recording its elided ranges with the session (ask sends a request and
// adds the hash); "unchanged" when the session was shown this outline of
// these bytes within the TTL.
func readSkeleton(shown, sendPath string, lines []string, size, maxLines int, ask func(string) (string, error)) (string, error) {
	rs := skeletonRanges(lines, maxLines)
	spec := make([]string, len(rs))
	for i, r := range rs {
		spec[i] = fmt.Sprintf("%d:%d", r.First, r.Count)
	}
	rangesTok := strings.Join(spec, ",")
	if rangesTok == "" {
		rangesTok = "-"
	}
	ans, err := ask("skeleton " + quoteToken(sendPath) + " " + rangesTok)
	if err != nil {
		return "", err
	}
	if ans == "dup" {
		return fmt.Sprintf("unchanged since your last read of the outline of %s (same bytes): use that; read elided lines with offset and limit\n", shown), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d lines, %d bytes, over the read tool's limit of %d lines or %d KiB: an outline follows, with the elided lines marked; read them with offset and limit\n",
		shown, len(lines), size, maxLines, readToolMaxBytes>>10)
	ri := 0
	for n := 1; n <= len(lines); n++ {
		if ri < len(rs) && int64(n) == rs[ri].First {
			last := rs[ri].First + rs[ri].Count - 1
			fmt.Fprintf(&b, "%6s\t… lines %d-%d elided (read with offset/limit to see them) …\n", "", n, last)
			n = int(last)
			ri++
			continue
		}
		line := lines[n-1]
		if len(line) > readToolMaxLine {
			line = fmt.Sprintf("%s… (%d more bytes of this line: read it with offset %d, limit 1)", line[:readToolMaxLine], len(line)-readToolMaxLine, n)
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, line)
	}
	return b.String(), nil
}

// readCommand is `rubinofs read`: the Read tool on the command line.
func readCommand() *cli.Command {
	return &cli.Command{
		Name:      "read",
		Usage:     "show a file as the Read tool shows it to a model: numbered lines, \"unchanged\" for a window your session was just shown, an outline of a big file (docs/DESIGN.md#read-tool)",
		ArgsUsage: "PATH",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "offset", Usage: "first line to show, 1-based (0: from the start)"},
			&cli.IntFlag{Name: "limit", Usage: "lines to show (0: all, or an outline when the file is over --max)"},
			&cli.IntFlag{Name: "max", Value: readToolMaxLines, Usage: "the most lines shown at once; a whole-file read of a longer file (or one over 256 KiB) shows an outline"},
			mountFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("usage: rubinofs read [--offset N] [--limit N] [--max N] [--mount DIR] PATH", exitUsage)
			}
			mnt, err := mountOf(c)
			if err != nil {
				return err
			}
			out, err := readToolMax(mnt, readToolInput{Path: c.Args().First(), Offset: c.Int("offset"), Limit: c.Int("limit")}, c.Int("max"))
			if err != nil {
				return cli.Exit("rubinofs read: "+err.Error(), 1)
			}
			_, err = fmt.Fprint(c.App.Writer, out)
			return err
		},
	}
}
