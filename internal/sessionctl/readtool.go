package sessionctl

// The per-session request file .rubino/sessions/NAME/readtool (reached as
// .rubino/self/readtool): the Read tool's questions to the caller's own
// read tracker (docs/DESIGN.md#read-tool). Open O_RDWR, write one request,
// read the one-word answer from offset 0 of the same handle:
//
//   window PATH FIRST COUNT [HASH]   -> "new", "dup" or "drill"
//   skeleton PATH RANGES [HASH]      -> "new" or "dup"
//
// window: the reader is about to show lines FIRST..FIRST+COUNT-1 of PATH
// (FIRST >= 1, COUNT >= 1), or the whole file ("0 0"). The answer is
// "drill" when the window overlaps a range the session's last skeleton of
// the file elided (guard.Tracker.DrillIn: show the bytes), "dup" when the
// same window was served within guard.DedupTTL, the bytes still hash the
// same and no edit failure or refusal of the file came since
// (guard.Tracker.DuplicateRead: answer "unchanged"), "new" otherwise (show
// the bytes). A "new" whole-file window also declares the read, as
// self/ctl's `read PATH HASH` does (guard.Guard.DeclareRead).
//
// skeleton: the reader is about to show an outline of PATH with RANGES
// elided: FIRST:COUNT pairs (1-based lines), comma-separated, ascending
// and disjoint, or "-" for none. The ranges are recorded
// (guard.Tracker.NoteSkeleton) and the outline is dedup'd as a window of
// its own; nothing is declared read.
//
// HASH is the xxh3-128 of the file's whole content as the reader read it
// (guard/tracked's format); without it the daemon hashes the file now.
// PATH is as for self/ctl (absolute inside the mount or relative to the
// writer's cwd, Go-quoted when it holds white space; the file itself, not
// a symlink, and one the writer could open for reading).
//
// Errors, each with its reason: EPERM for any caller but the session's own
// processes (not even its owner uid or root from outside: an answer or a
// record here changes what the session's model is told it has seen), for
// a PATH outside the mount; EAGAIN for a caller whose session is not
// known yet; EINVAL for bad syntax, a bad hash or a PATH that is not a
// regular file; ENOENT for no such file; EACCES for a file the writer
// could not read; EFBIG for a request over maxReadToolRequest.

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// Limits of the readtool request file.
const (
	// maxReadToolRequest bounds one readtool request, in bytes: a longer
	// one fails with EFBIG.
	maxReadToolRequest = 64 << 10
	// MaxSkeletonRanges bounds the elided ranges of one skeleton request,
	// in ranges (each kept per session and file until the next skeleton):
	// more fail with EINVAL. A reader merges its tail ranges to stay under
	// it.
	MaxSkeletonRanges = 4096
)

// skeletonLimit is the window key under which a skeleton view is dedup'd:
// guard.Tracker.DuplicateRead's (offset 0, limit -1), which no line window
// can take (docs/DESIGN.md#read-tool).
const skeletonLimit = -1

const readToolUsage = "want `window PATH FIRST COUNT [HASH]` or `skeleton PATH FIRST:COUNT,...|- [HASH]`"

// readToolReq is a parsed readtool request.
type readToolReq struct {
	Verb         string // "window" or "skeleton"
	Path         string
	First, Count int64         // window: the lines shown; 0, 0 for the whole file
	Ranges       []guard.Range // skeleton: the elided ranges
	Hash         guard.Hash    // zero when not given
}

// splitTokens splits a request into tokens (ctltree.SplitRequest); a
// malformed one's reason names the grammar.
func splitTokens(line string) ([]string, error) {
	toks, err := ctltree.SplitRequest(line)
	var ce *ctltree.Error
	if errors.As(err, &ce) {
		ce.Msg += ": " + readToolUsage
	}
	return toks, err
}

// parseReadToolRequest parses one readtool request. Errors are
// *ctltree.Error: EFBIG over maxReadToolRequest, EINVAL with the reason.
func parseReadToolRequest(b []byte) (readToolReq, error) {
	if len(b) > maxReadToolRequest {
		return readToolReq{}, ctltree.Errorf(syscall.EFBIG, "request of %d bytes exceeds the limit of %d bytes", len(b), maxReadToolRequest)
	}
	line := string(b)
	if !utf8.ValidString(line) || strings.IndexByte(line, 0) >= 0 {
		return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "request is not UTF-8 text without NUL bytes")
	}
	toks, err := splitTokens(line)
	if err != nil {
		return readToolReq{}, err
	}
	if len(toks) == 0 {
		return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "empty request: %s", readToolUsage)
	}
	req := readToolReq{Verb: toks[0]}
	var hashTok []string
	switch {
	case req.Verb == "window" && (len(toks) == 4 || len(toks) == 5):
		first, err1 := strconv.ParseInt(toks[2], 10, 64)
		count, err2 := strconv.ParseInt(toks[3], 10, 64)
		if err1 != nil || err2 != nil {
			return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "FIRST %q and COUNT %q must be integers: %s", ctltree.Clip(toks[2]), ctltree.Clip(toks[3]), readToolUsage)
		}
		whole := first == 0 && count == 0
		if !whole && (first < 1 || count < 1) {
			return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "window %d %d: FIRST and COUNT must both be 1 or more (lines are 1-based), or both 0 for the whole file", first, count)
		}
		req.First, req.Count = first, count
		hashTok = toks[4:]
	case req.Verb == "skeleton" && (len(toks) == 3 || len(toks) == 4):
		rs, err := parseRanges(toks[2])
		if err != nil {
			return readToolReq{}, err
		}
		req.Ranges = rs
		hashTok = toks[3:]
	case req.Verb == "window" || req.Verb == "skeleton":
		return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "wrong number of fields for %s: %s", req.Verb, readToolUsage)
	default:
		return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "unknown request %q: %s", ctltree.Clip(req.Verb), readToolUsage)
	}
	req.Path = toks[1]
	if req.Path == "" {
		return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "empty PATH: %s", readToolUsage)
	}
	if len(hashTok) == 1 {
		h, err := guard.ParseHash(hashTok[0])
		if err != nil {
			return readToolReq{}, ctltree.Errorf(syscall.EINVAL, "%v", err)
		}
		req.Hash = h
	}
	return req, nil
}

// parseRanges parses a skeleton's RANGES: "-" for none, else FIRST:COUNT
// pairs (FIRST, COUNT >= 1), comma-separated, ascending and disjoint, at
// most MaxSkeletonRanges.
func parseRanges(s string) ([]guard.Range, error) {
	if s == "-" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxSkeletonRanges {
		return nil, ctltree.Errorf(syscall.EINVAL, "%d elided ranges exceed the limit of %d: merge the tail into one range", len(parts), MaxSkeletonRanges)
	}
	out := make([]guard.Range, 0, len(parts))
	var next int64 = 1 // the first line the next range may start at
	for _, p := range parts {
		a, b, ok := strings.Cut(p, ":")
		first, err1 := strconv.ParseInt(a, 10, 64)
		count, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || first < 1 || count < 1 || first > 1<<40 || count > 1<<40 {
			return nil, ctltree.Errorf(syscall.EINVAL, "elided range %q: want FIRST:COUNT, both 1 or more", ctltree.Clip(p))
		}
		if first < next {
			return nil, ctltree.Errorf(syscall.EINVAL, "elided range %q overlaps or precedes the one before: ranges must be ascending and disjoint", ctltree.Clip(p))
		}
		out = append(out, guard.Range{First: first, Count: count})
		next = first + count
	}
	return out, nil
}

// readTool is the Clone handler of sessions/NAME/readtool: it answers
// only the session's own processes (docs/DESIGN.md#read-tool).
func (s *Feature) readTool(name string) func(c ctltree.Caller, spec []byte) (string, error) {
	return func(c ctltree.Caller, spec []byte) (string, error) {
		if c.Session == sessions.Unknown || name == sessions.Unknown {
			return "", ctltree.Errorf(syscall.EAGAIN, "the caller's session could not be determined (its process is changing, e.g. in execve); try again")
		}
		if c.Session != name {
			// EPERM even for the session's owner and root: the answers
			// and records here are what the session's model is told it
			// has seen, which only the session itself may say.
			return "", ctltree.Errorf(syscall.EPERM, "session %s (uid %d) may not use the read tool of session %s: a session asks only its own (.rubino/self/readtool)", c.Session, c.Uid, name)
		}
		req, err := parseReadToolRequest(spec)
		if err != nil {
			return "", err
		}
		rel, t, err := s.callerTarget(c, req.Path)
		if err != nil {
			return "", err
		}
		if e := s.host.Readable(c, rel); e != nil {
			e.Msg += "; the read tool answers only for files the caller can open for reading"
			return "", e
		}
		g := s.cfg.Guard
		h := req.Hash
		if h.IsZero() {
			if h, err = g.Hashes().Sum(t.Stat, t.Open); err != nil {
				return "", ctltree.Errorf(syscall.EIO, "%s: hashing: %v", rel, err)
			}
		}
		ans, err := answerReadTool(g, name, t, req, h)
		if err != nil {
			return "", ctltree.Errorf(syscall.EIO, "%s: %v", rel, err)
		}
		return ans, nil
	}
}

// answerReadTool asks session's tracker req's question about t, whose
// content hashes to h (docs/DESIGN.md#read-tool).
func answerReadTool(g *guard.Guard, session string, t guard.Target, req readToolReq, h guard.Hash) (string, error) {
	tr := g.ForSession(session)
	id := t.Stat.ID
	word := func(dup bool) string {
		if dup {
			return "dup"
		}
		return "new"
	}
	switch {
	case req.Verb == "skeleton":
		dup, err := tr.DuplicateRead(t, 0, skeletonLimit, h)
		if err != nil {
			return "", err
		}
		tr.NoteSkeleton(id, req.Ranges)
		return word(dup), nil
	case req.First == 0: // the whole file
		unlock := g.Lock(id) // no guarded mutation is half-done meanwhile
		defer unlock()
		dup, err := tr.DuplicateRead(t, 0, 0, h)
		if err != nil || dup {
			// A duplicate declares nothing: the bytes were declared when
			// they were served, and declaring again would restart the
			// TTL the window counts from.
			return word(dup), err
		}
		if err := g.DeclareRead(session, t, h, true); err != nil {
			return "", err
		}
		// The declaration, a full view, dropped the file's windows: record
		// this one again.
		_, err = tr.DuplicateRead(t, 0, 0, h)
		return "new", err
	default:
		drill := tr.DrillIn(id, req.First, req.Count)
		dup, err := tr.DuplicateRead(t, req.First, req.Count, h)
		if err != nil {
			return "", err
		}
		if drill {
			return "drill", nil
		}
		return word(dup), nil
	}
}

// callerTarget resolves PATH as c names it (Host.CallerRel) to its
// workspace-relative path and the regular file it names
// (Host.LookupTarget). Errors are *ctltree.Error: those of CallerRel;
// ENOENT for no such file; EINVAL for a symlink on the way or a file that
// is not regular.
func (s *Feature) callerTarget(c ctltree.Caller, p string) (string, guard.Target, error) {
	rel, err := s.host.CallerRel(c, p)
	if err != nil {
		return "", guard.Target{}, err
	}
	t, err := s.host.LookupTarget(rel)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) && errno == syscall.ENOENT {
			return "", guard.Target{}, ctltree.Errorf(syscall.ENOENT, "%s: no such file", rel)
		}
		return "", guard.Target{}, ctltree.Errorf(syscall.EINVAL, "%s: %v (PATH must name the file itself, not a symlink)", rel, err)
	}
	if t.Stat.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", guard.Target{}, ctltree.Errorf(syscall.EINVAL, "%s is not a regular file", rel)
	}
	return rel, t, nil
}
