package sessionctl

// The per-session control file .rubino/sessions/NAME/ctl (reachable as
// .rubino/self/ctl): a harness declares what its model was shown, since in
// harness mode the harness root's own reads count for nothing
// (docs/DESIGN.md#scanner-reads). One command per write(2):
//
//   read PATH [HASH]   the model was shown PATH (in full, with HASH: the
//                      xxh3-128 of the bytes shown, as guard/tracked prints
//                      it); guard.Guard.DeclareRead says what is recorded
//   edit-failed PATH   the model's edit of PATH failed in the harness: its
//                      next read bypasses dedup (guard.Tracker.NoteEditFailure)
//   checkpoint [LABEL], rewind CP [--force] [--dry-run] [-- PATH...]
//                      the journal's commands (internal/journalctl)
//
// PATH is absolute (inside the mount, as the caller sees it) or relative to
// the writing process's cwd; a PATH holding white space is written as a Go
// quoted string. It names the file itself: a symlink on the way or at the
// end is refused. Errors (each with its reason in the "error: REASON"
// read-back): EINVAL for bad syntax, a bad hash or a PATH that is not a
// regular file; ENOENT for no such file; EACCES for a PATH the writer
// could not open for reading itself (docs/DESIGN.md#as-caller), with the
// reason; EPERM for a PATH outside the mount
// or a caller outside the session (below); EAGAIN when the caller's cwd
// could not be read within procfs.Bound (it is in execve).
//
// Authorisation follows the other session control files (Owners.MayActOn):
// the session's own processes (the harness and its descendants, such as
// hook processes), and from outside every session the session's owner uid,
// the mount's owner and root, may write it; anyone else gets EPERM, so no
// session and no other uid can make files writable for another.

import (
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// maxSelfCommand bounds one sessions/NAME/ctl write, in bytes (PATH_MAX
// plus room for the verb and the hash); a longer one fails with EFBIG.
const maxSelfCommand = 4096 + 64

const selfCmdUsage = "want `read PATH [HASH]` or `edit-failed PATH`"

// selfCmd is a parsed sessions/NAME/ctl write.
type selfCmd struct {
	Verb    string // "read" or "edit-failed"
	Path    string
	Hash    guard.Hash
	HasHash bool
}

// parseSelfCommand parses one sessions/NAME/ctl command. Errors are
// *ctltree.Error: EFBIG over maxSelfCommand, EINVAL with the reason.
func parseSelfCommand(line string) (selfCmd, error) {
	if len(line) > maxSelfCommand {
		return selfCmd{}, ctltree.Errorf(syscall.EFBIG, "command of %d bytes exceeds the limit of %d bytes", len(line), maxSelfCommand)
	}
	if !utf8.ValidString(line) || strings.IndexByte(line, 0) >= 0 {
		return selfCmd{}, ctltree.Errorf(syscall.EINVAL, "command is not UTF-8 text without NUL bytes")
	}
	line = strings.TrimSpace(line)
	verb, rest, _ := strings.Cut(line, " ")
	if verb != "read" && verb != "edit-failed" {
		return selfCmd{}, ctltree.Errorf(syscall.EINVAL, "unknown command %q: %s", ctltree.Clip(line), selfCmdUsage)
	}
	rest = strings.TrimLeft(rest, " \t")
	var p string
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return selfCmd{}, ctltree.Errorf(syscall.EINVAL, "malformed quoted path: %s", selfCmdUsage)
		}
		p, _ = strconv.Unquote(q)
		rest = rest[len(q):]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return selfCmd{}, ctltree.Errorf(syscall.EINVAL, "junk after the quoted path: %s", selfCmdUsage)
		}
	} else {
		p, rest, _ = strings.Cut(rest, " ")
	}
	if p == "" {
		return selfCmd{}, ctltree.Errorf(syscall.EINVAL, "missing PATH: %s", selfCmdUsage)
	}
	cmd := selfCmd{Verb: verb, Path: p}
	args := strings.Fields(rest)
	switch {
	case len(args) == 0:
	case len(args) == 1 && verb == "read":
		h, err := guard.ParseHash(args[0])
		if err != nil {
			return selfCmd{}, ctltree.Errorf(syscall.EINVAL, "%v", err)
		}
		cmd.Hash, cmd.HasHash = h, true
	default:
		return selfCmd{}, ctltree.Errorf(syscall.EINVAL, "too many fields: %s", selfCmdUsage)
	}
	return cmd, nil
}

// selfCtl is the Write handler of sessions/NAME/ctl.
func (s *Feature) selfCtl(name string) func(c ctltree.Caller, cmd []byte) error {
	return func(c ctltree.Caller, b []byte) error {
		for _, sf := range s.host.SessionFeatures() { // the journal's verbs (docs/DESIGN.md#ctl-room)
			if handled, err := sf.SessionCtl(c, name, b); handled {
				return err
			}
		}
		if !s.owners.MayActOn(c, name) {
			// EPERM: no session may declare reads for another; only the
			// session's owner uid, the mount's owner and root, from
			// outside every session, may (owners.go).
			return ctltree.Errorf(syscall.EPERM, "session %s (uid %d) may not declare reads for session %s", c.Session, c.Uid, name)
		}
		cmd, err := parseSelfCommand(string(b))
		if err != nil {
			return err
		}
		rel, t, err := s.callerTarget(c, cmd.Path) // readtool.go
		if err != nil {
			return err
		}
		g := s.cfg.Guard
		switch cmd.Verb {
		case "read":
			// Only what the writer could read itself (docs/DESIGN.md#as-caller):
			// a declaration records the file's hash, which tracked shows.
			if e := s.host.Readable(c, rel); e != nil {
				e.Msg += "; declare only files the writer can open for reading"
				return e
			}
			unlock := g.Lock(t.Stat.ID) // no guarded mutation is half-done meanwhile
			err = g.DeclareRead(name, t, cmd.Hash, cmd.HasHash)
			unlock()
			if err != nil {
				// EIO: the file could not be hashed; nothing was recorded.
				return ctltree.Errorf(syscall.EIO, "%s: %v", rel, err)
			}
		case "edit-failed":
			g.DeclareEditFailed(name, t.Stat.ID)
		}
		return nil
	}
}
