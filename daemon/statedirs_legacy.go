package daemon

// Guessing the workspace of a state directory made before the marker
// (MarkerFileName) existed: from its log's "mounted" record, else from its
// name (docs/DESIGN.md#state-retention).

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxLogTail bounds how much of a legacy state directory's rubinofs.log is
// read for its "mounted" record: its last 1 MiB.
const maxLogTail = 1 << 20

// loggedWorkspace returns the workspace of the last "mounted" record in
// dir/rubinofs.log (text or JSON records of log/slog), or "".
func loggedWorkspace(dir string) string {
	f, err := os.OpenFile(filepath.Join(dir, "rubinofs.log"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return ""
	} else if st.Size() > maxLogTail {
		f.Seek(st.Size()-maxLogTail, io.SeekStart)
	}
	ws := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if w := mountedWorkspace(sc.Text()); w != "" {
			ws = w
		}
	}
	return ws
}

// mountedWorkspace parses one log line: the workspace of a "mounted"
// record, or "".
func mountedWorkspace(line string) string {
	if strings.HasPrefix(line, "{") {
		var rec struct {
			Msg       string `json:"msg"`
			Workspace string `json:"workspace"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "mounted" && filepath.IsAbs(rec.Workspace) {
			return rec.Workspace
		}
		return ""
	}
	if !strings.Contains(line, " msg=mounted ") {
		return ""
	}
	_, v, ok := strings.Cut(line, " workspace=")
	if !ok {
		return ""
	}
	if strings.HasPrefix(v, `"`) {
		// A quoted value: the longest prefix that unquotes.
		for i := len(v); i > 1; i-- {
			if s, err := strconv.Unquote(v[:i]); err == nil {
				v = s
				break
			}
		}
	} else if i := strings.IndexByte(v, ' '); i >= 0 {
		v = v[:i]
	}
	if !filepath.IsAbs(v) {
		return ""
	}
	return v
}

// maxDecodeStats bounds the lstat calls of one decodeStateName.
const maxDecodeStats = 4096

// decodeStateName looks for an existing directory whose default state
// directory name (its absolute path with "/" as "-") is name, and returns
// it. The encoding loses where the dashes were, so every split of name at
// a dash is tried against the file system, one component at a time.
// found false and sure true: no such directory exists; sure false: the
// lookups ran past maxDecodeStats, so nothing is known.
func decodeStateName(name string) (ws string, found, sure bool) {
	if name == "-" {
		return "/", true, true
	}
	budget := maxDecodeStats
	var walk func(dir, rest string) (string, bool)
	walk = func(dir, rest string) (string, bool) {
		// A component is rest up to a dash (not the first byte: a name
		// may start with one) or all of rest.
		for i := 1; i <= len(rest); i++ {
			if i < len(rest) && rest[i] != '-' {
				continue
			}
			if budget--; budget < 0 {
				return "", false
			}
			if c := rest[:i]; c == "." || c == ".." {
				continue
			}
			p := filepath.Join(dir, rest[:i])
			st, err := os.Stat(p)
			if err != nil || !st.IsDir() {
				continue
			}
			if i == len(rest) {
				return p, true
			}
			if ws, ok := walk(p, rest[i+1:]); ok {
				return ws, true
			}
		}
		return "", false
	}
	ws, found = walk("/", name)
	return ws, found, budget >= 0
}
