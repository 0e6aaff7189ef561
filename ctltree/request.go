package ctltree

// Tokens of a request written to a control file.

import (
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// SplitRequest splits a control request line into tokens: runs of
// non-space bytes, or Go-quoted strings (a path with white space). EINVAL for a malformed quoted token, NUL
// bytes or invalid UTF-8.
func SplitRequest(line string) ([]string, error) {
	if !utf8.ValidString(line) || strings.IndexByte(line, 0) >= 0 {
		return nil, Errorf(syscall.EINVAL, "request is not UTF-8 text without NUL bytes")
	}
	var out []string
	for {
		line = strings.TrimLeft(line, " \t\r\n")
		if line == "" {
			return out, nil
		}
		if line[0] == '"' || line[0] == '`' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, Errorf(syscall.EINVAL, "malformed quoted token at %q", Clip(line))
			}
			s, _ := strconv.Unquote(q)
			out = append(out, s)
			line = line[len(q):]
			if line != "" && !strings.ContainsRune(" \t\r\n", rune(line[0])) {
				return nil, Errorf(syscall.EINVAL, "junk after the quoted token %s", Clip(q))
			}
			continue
		}
		i := strings.IndexAny(line, " \t\r\n")
		if i < 0 {
			i = len(line)
		}
		out = append(out, line[:i])
		line = line[i:]
	}
}
