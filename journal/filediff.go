package journal

// One path's git-style diff, for callers that hold both sides themselves.

import (
	"io"
	"strings"
)

// FileSide is one side of one path's diff (WriteFileDiff): absent
// (Exists false), or a file or symlink with its git mode (0o100644,
// 0o100755, 0o120000) and Content (a file's bytes, a symlink's target).
// Binary shows the side as binary without Content (the caller decided it,
// say from a NUL in the first 8000 bytes, and did not load the rest).
type FileSide struct {
	Exists  bool
	Mode    uint32
	Content []byte
	Binary  bool
}

// WriteFileDiff writes path's diff from a to b to w exactly as Diff
// renders one path (docs/DESIGN.md#journal-cli): "diff --git a/P b/P",
// the new/deleted/old+new mode lines, then the hunks (3 lines of context)
// or "Binary files a/P and b/P differ". Nothing is written when both sides
// are absent, or when the contents and modes are equal (two Binary sides
// always differ: give equal sides without Binary). The error is w's.
// Safe for concurrent use (no shared state).
func WriteFileDiff(w io.Writer, path string, a, b FileSide) error {
	var out strings.Builder
	writeFileDiff(&out, path, a.side(), b.side())
	_, err := io.WriteString(w, out.String())
	return err
}

func (f FileSide) side() side {
	s := side{exists: f.Exists, mode: f.Mode, content: f.Content}
	if f.Binary {
		s.note = "binary"
	}
	return s
}
