package journal

// The unified diff of a session's changes since a checkpoint, as git diff
// prints it.

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// binaryProbe is how many leading bytes are searched for a NUL to call a
// side binary (git's rule).
const binaryProbe = 8000

// side is one side of a path's diff: absent, or content (a file's bytes or
// a symlink's target) with a git mode (100644, 100755, 120000, ...).
type side struct {
	exists  bool
	mode    uint32
	content []byte
	note    string // why the bytes are missing (unrecoverable)
}

// Diff renders a unified diff, as git diff does, of each changed path's
// state at checkpoint since ("" = the session start) against its current
// state, in path order, limited to paths (each with what is below it; nil:
// all). Per path: "diff --git a/P b/P", then "new file mode M" / "deleted
// file mode M" / "old mode M" + "new mode M", then "--- a/P" (or
// /dev/null) and "+++ b/P" (or /dev/null) and the hunks (3 lines of
// context; "\ No newline at end of file" where git puts it), or "Binary
// files a/P and b/P differ" when either side has a NUL in its first 8000
// bytes (or the pre-image's bytes were not kept). Directories are not
// diffed; a symlink's content is its target (mode 120000). Paths whose
// content and mode are unchanged print nothing. cur returns a regular
// file's current bytes; a symlink's target comes from ins when it has a
// Readlink(path) (string, error) method, and bytes are withheld as
// ContentGate says when ins is one. Errors are the log's, the blob
// store's, ins's and cur's.
func (j *Journal) Diff(sessionName, since string, paths []string, ins Inspector, cur func(path string) ([]byte, error)) (string, error) {
	var out strings.Builder
	if err := j.DiffTo(&out, sessionName, since, paths, ins, cur); err != nil {
		return "", err
	}
	return out.String(), nil
}

// ContentGate, when the Inspector given to Diff implements it, says which
// bytes Diff may show (docs/DESIGN.md#as-caller): MayShow is asked for
// path's pre-image (pre non-nil) and for its current state (pre nil), for
// each side with bytes (a file's or a symlink's target); false shows that
// side as binary with its bytes withheld (NoteHidden).
type ContentGate interface {
	MayShow(path string, pre *PreImage) bool
}

// NoteHidden is why a diff side's bytes are missing when a ContentGate
// withheld them.
const NoteHidden = "withheld: the requester could not read it"

// gated is s, its bytes withheld when g says no.
func gated(g ContentGate, path string, pre *PreImage, s side) side {
	if !s.exists || s.note != "" || g.MayShow(path, pre) {
		return s
	}
	return side{exists: true, mode: s.mode, note: NoteHidden}
}

func (j *Journal) preSide(pre PreImage) (side, error) {
	switch pre.Kind {
	case KindSymlink:
		return side{exists: true, mode: 0o120000, content: []byte(pre.Target)}, nil
	case KindFile:
		s := side{exists: true, mode: pre.Mode}
		if pre.Unrecoverable != "" || pre.Blob == "" {
			s.note = pre.Unrecoverable
			if s.note == "" {
				s.note = "not a regular file"
			}
			return s, nil
		}
		if err := j.blobs.Check(pre.Blob, pre.Size); err != nil {
			s.note = UnrecoverableLost // docs/DESIGN.md#journal-sync
			return s, nil
		}
		f, err := j.blobs.Open(pre.Blob)
		if err != nil {
			return side{}, err
		}
		defer f.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(f); err != nil {
			return side{}, err
		}
		s.content = buf.Bytes()
		return s, nil
	}
	return side{}, nil
}

func curSide(path string, ins Inspector, cur func(string) ([]byte, error)) (side, error) {
	a, err := ins.Lstat(path)
	if err != nil {
		return side{}, err
	}
	switch a.Kind {
	case KindSymlink:
		rl, ok := ins.(interface{ Readlink(string) (string, error) })
		if !ok {
			return side{exists: true, mode: 0o120000, note: "symlink"}, nil
		}
		t, err := rl.Readlink(path)
		if err != nil {
			return side{}, err
		}
		return side{exists: true, mode: 0o120000, content: []byte(t)}, nil
	case KindFile:
		if a.Mode&0o170000 != 0o100000 {
			return side{exists: true, mode: a.Mode, note: "not a regular file"}, nil
		}
		b, err := cur(path)
		if err != nil {
			return side{}, err
		}
		return side{exists: true, mode: a.Mode, content: b}, nil
	}
	return side{}, nil
}

func gitMode(m uint32) string { return fmt.Sprintf("%06o", m) }

func isBinary(s side) bool {
	if s.note != "" {
		return true
	}
	b := s.content
	if len(b) > binaryProbe {
		b = b[:binaryProbe]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// GitQuote is path p as git prints it with core.quotePath off: unchanged,
// unless it holds a control character, a double quote or a backslash; then
// in double quotes with C escapes (\n, \t, \", \\, octal for the rest), so
// a file name with a newline never starts a line of a diff of its own.
func GitQuote(p string) string {
	if strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '"' || r == '\\' }) < 0 {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func writeFileDiff(out *strings.Builder, p string, a, b side) {
	if !a.exists && !b.exists {
		return
	}
	same := a.exists && b.exists && a.note == "" && b.note == "" && bytes.Equal(a.content, b.content)
	if same && a.mode == b.mode {
		return
	}
	fmt.Fprintf(out, "diff --git %s %s\n", GitQuote("a/"+p), GitQuote("b/"+p))
	switch {
	case !a.exists:
		fmt.Fprintf(out, "new file mode %s\n", gitMode(b.mode))
	case !b.exists:
		fmt.Fprintf(out, "deleted file mode %s\n", gitMode(a.mode))
	case a.mode != b.mode:
		fmt.Fprintf(out, "old mode %s\nnew mode %s\n", gitMode(a.mode), gitMode(b.mode))
	}
	if same {
		return
	}
	from, to := GitQuote("a/"+p), GitQuote("b/"+p)
	if !a.exists {
		from = "/dev/null"
	}
	if !b.exists {
		to = "/dev/null"
	}
	if isBinary(a) || isBinary(b) {
		fmt.Fprintf(out, "Binary files %s and %s differ\n", from, to)
		return
	}
	if len(a.content) == 0 && len(b.content) == 0 {
		return
	}
	A, B := splitLines(a.content), splitLines(b.content)
	if lineDiffCost(A, B) > maxLineDiffCost {
		wholeHunk(out, from, to, A, B)
		return
	}
	text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: A, B: B,
		FromFile: from, ToFile: to, Context: 3,
	})
	out.WriteString(text)
}

// maxLineDiffCost bounds the work of one file's line diff. go-difflib
// costs about (lines changed) x (lines of both sides): measured on this
// host, 26 s for two 20,000-line files differing in every other line,
// 8.5 min at 80,000, so a file an agent wrote could hold `rubinofs diff`
// and `branch diff` for hours. Past the bound (about 0.7 s of that work)
// the file's diff is one hunk replacing every old line by every new
// line: a valid unified diff (git apply takes it), not a minimal one.
const maxLineDiffCost = 20_000_000

// lineDiffCost estimates go-difflib's work on a and b: the lines of
// either side the other lacks (counted as multisets) times the lines of
// both. O(lines).
func lineDiffCost(a, b []string) int {
	count := make(map[string]int, len(a))
	for _, l := range a {
		count[l]++
	}
	changed := 0
	for _, l := range b {
		if count[l] > 0 {
			count[l]--
		} else {
			changed++
		}
	}
	for _, n := range count {
		changed += n
	}
	return changed * (len(a) + len(b))
}

// wholeHunk writes the diff of a to b as one hunk: every line of a
// removed, every line of b added (the headers as go-difflib writes them).
func wholeHunk(out *strings.Builder, from, to string, a, b []string) {
	span := func(n int) string {
		switch n {
		case 0:
			return "0,0"
		case 1:
			return "1"
		}
		return fmt.Sprintf("1,%d", n)
	}
	fmt.Fprintf(out, "--- %s\n+++ %s\n@@ -%s +%s @@\n", from, to, span(len(a)), span(len(b)))
	for _, l := range a {
		out.WriteString("-" + l)
	}
	for _, l := range b {
		out.WriteString("+" + l)
	}
}

// splitLines splits b after each newline; a last line without one carries
// git's "\ No newline at end of file" marker.
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		return lines[:len(lines)-1]
	}
	lines[len(lines)-1] += "\n\\ No newline at end of file\n"
	return lines
}
