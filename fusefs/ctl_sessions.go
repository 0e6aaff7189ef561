package fusefs

// Session control files (issue 4): .rubino/sessions/ and .rubino/self.
//
//   sessions/clone     write "name=NAME pid=PID harness=1 cmd=COMMAND" (each
//                      optional; the name defaults to a generated id, the
//                      pid to the writer's), read the id
//   sessions/ctl       "end NAME", "rename OLD NEW"
//   sessions/<id>/     info (JSON), tracked, denials, why, ctl (ctl_self.go)
//   self               symlink to sessions/<caller's session>
//
// Authorisation (issue 4: "only the mount's owner or an unregistered caller
// may register or end another session; a session can never loosen its own
// or another's guard"):
//   - Any caller may make its own process, or one of its descendants, the
//     root of a new session: a new session has read nothing, so this only
//     tightens. An unregistered caller who is the mount's owner (or root)
//     may register any process.
//   - A session may end or rename itself, except that ending itself under
//     --unregistered allow would leave its processes unguarded: EPERM.
//   - Acting on another session takes an unregistered caller who is the
//     mount's owner or root; a registered session never acts on another.
//   - Names are never "default" or an existing session's (joining a session
//     would share its reads): EEXIST.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// SessionRegistry is what the session control files need from the session
// registry (guard.Sessions implements it).
type SessionRegistry interface {
	Resolver
	// RegisterAs registers pid as the root of session name, an agent
	// harness when harness is set (guard.Sessions.RegisterAs).
	RegisterAs(name string, pid uint32, cmd string, harness bool) error
	End(name string) error
	Rename(oldName, newName string) error
	List() []guard.SessionInfo
	IsDescendant(pid, ancestor uint32) bool
}

// sessionsCtl builds .rubino/sessions and .rubino/self.
func (f *FS) sessionsCtl(reg SessionRegistry) []ctltree.Entry {
	perSession := func(name string) ctltree.Node {
		return ctltree.NewDir(
			ctltree.Entry{Name: "info", Node: ctltree.Text(func(ctltree.Caller) string { return f.sessionInfo(reg, name) })},
			ctltree.Entry{Name: "tracked", Node: ctltree.Text(func(ctltree.Caller) string { return string(f.trackedText(name)) })},
			ctltree.Entry{Name: "denials", Node: &ctltree.File{Kind: ctltree.ReadOnly, Read: f.readDenials(name)}},
			ctltree.Entry{Name: "why", Node: ctltree.Text(func(ctltree.Caller) string { return string(f.whyText(name)) })},
			ctltree.Entry{Name: "ctl", Node: &ctltree.File{Kind: ctltree.Ctl, Write: f.selfCtl(name)}},
		)
	}
	names := func() []string {
		out := []string{DefaultSession}
		seen := map[string]bool{DefaultSession: true}
		for _, s := range reg.List() {
			if !seen[s.Name] {
				seen[s.Name] = true
				out = append(out, s.Name)
			}
		}
		return out
	}
	dir := &ctltree.Dir{
		Entries: []ctltree.Entry{
			{Name: "clone", Node: &ctltree.File{Kind: ctltree.Clone, Clone: func(c ctltree.Caller, spec []byte) (string, error) {
				return f.registerSession(reg, c, spec)
			}}},
			{Name: "ctl", Node: &ctltree.File{Kind: ctltree.Ctl, Write: func(c ctltree.Caller, cmd []byte) error {
				return f.sessionCommand(reg, c, string(cmd))
			}}},
		},
		List: func(ctltree.Caller) []string { return names() },
		Lookup: func(_ ctltree.Caller, name string) ctltree.Node {
			for _, n := range names() {
				if n == name {
					return perSession(name)
				}
			}
			return nil
		},
	}
	self := &ctltree.Symlink{Target: func(c ctltree.Caller) string { return "sessions/" + c.Session }}
	return []ctltree.Entry{{Name: "sessions", Node: dir}, {Name: "self", Node: self}}
}

// AttachSessions installs the session registry: callers resolve through it
// and .rubino/sessions and .rubino/self appear. Call before mounting.
func (f *FS) AttachSessions(reg SessionRegistry) {
	f.cfg.Sessions = reg
	for _, e := range f.sessionsCtl(reg) {
		f.AddCtl(e)
	}
}

// Limits of the session control files.
const (
	// maxSessionSpec bounds one sessions/clone write, in bytes; a longer
	// spec fails with EFBIG.
	maxSessionSpec = 64 << 10
	// maxSessionCmd bounds the cmd field kept for display, in bytes; a
	// longer command line (rubinofs run passes its argv) is clipped, never
	// refused.
	maxSessionCmd = 4 << 10
	// maxSessionCommand bounds one sessions/ctl write, in bytes; a longer
	// command fails with EFBIG.
	maxSessionCommand = 1 << 10
	// MaxSessions bounds the live sessions, in entries: a registration
	// beyond it fails with EAGAIN until one ends. Each live session holds a
	// pidfd and a goroutine in the daemon.
	MaxSessions = 1024
)

// sessionSpec is a parsed sessions/clone write.
type sessionSpec struct {
	Name string // "" for a generated name
	Pid  uint32 // 0 for the caller's own pid
	Cmd  string // display only, at most maxSessionCmd bytes
	// Harness marks the root as an agent harness (harness=1): its own
	// reads do not count (docs/DESIGN.md#scanner-reads).
	Harness bool
}

// String renders the spec in the form parseSessionSpec accepts.
func (s sessionSpec) String() string {
	var parts []string
	if s.Pid != 0 {
		parts = append(parts, "pid="+strconv.FormatUint(uint64(s.Pid), 10))
	}
	if s.Name != "" {
		parts = append(parts, "name="+s.Name)
	}
	if s.Harness {
		parts = append(parts, "harness=1")
	}
	if s.Cmd != "" {
		parts = append(parts, "cmd="+s.Cmd)
	}
	return strings.Join(parts, " ")
}

// parseSessionSpec parses "name=NAME pid=PID cmd=COMMAND": space-separated
// key=value fields, each at most once and each optional; cmd takes the rest
// of the input (it may hold spaces and newlines) and is clipped to
// maxSessionCmd bytes. A name must pass guard.ValidSessionName and not be
// reserved for tasks. Errors are *ctltree.Error: EFBIG over maxSessionSpec;
// EPERM for a reserved name; EINVAL (with the reason) for anything else
// malformed, NUL bytes and invalid UTF-8 included.
func parseSessionSpec(spec []byte) (sessionSpec, error) {
	var out sessionSpec
	if len(spec) > maxSessionSpec {
		return out, ctltree.Errorf(syscall.EFBIG, "session spec of %d bytes exceeds the limit of %d bytes", len(spec), maxSessionSpec)
	}
	if !utf8.Valid(spec) || bytes.IndexByte(spec, 0) >= 0 {
		return out, ctltree.Errorf(syscall.EINVAL, "session spec is not UTF-8 text without NUL bytes")
	}
	line := strings.TrimSpace(string(spec))
	seen := map[string]bool{}
	for line != "" {
		var field string
		if strings.HasPrefix(line, "cmd=") {
			field, line = line, ""
		} else {
			field, line, _ = strings.Cut(line, " ")
			line = strings.TrimLeft(line, " \t\r\n")
		}
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "malformed field %q: want key=value (name, pid, cmd)", clipReason(field))
		}
		if seen[k] {
			return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "field %q given twice", clipReason(k))
		}
		seen[k] = true
		switch k {
		case "name":
			if err := guard.ValidSessionName(v); err != nil {
				return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "%v", err)
			}
			if err := reservedName(v); err != nil {
				return sessionSpec{}, err
			}
			out.Name = v
		case "pid":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "pid %q is not a process id", clipReason(v))
			}
			out.Pid = uint32(n)
		case "cmd":
			out.Cmd = clipText(strings.TrimSpace(v), maxSessionCmd)
		case "harness":
			if v != "0" && v != "1" {
				return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "harness %q: want 0 or 1", clipReason(v))
			}
			out.Harness = v == "1"
		default:
			return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "unknown field %q (want name, pid, harness, cmd)", clipReason(k))
		}
	}
	return out, nil
}

// clipText cuts s to at most n bytes on a UTF-8 boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// registerSession registers the session a sessions/clone write asks for.
func (f *FS) registerSession(reg SessionRegistry, c ctltree.Caller, spec []byte) (string, error) {
	sp, err := parseSessionSpec(spec)
	if err != nil {
		return "", err
	}
	name, pid := sp.Name, sp.Pid
	if pid == 0 {
		pid = c.Pid
	}
	owner := c.Session == DefaultSession && c.Privileged
	if !owner && !reg.IsDescendant(pid, c.Pid) {
		return "", ctltree.Errorf(syscall.EPERM, "pid %d is neither the caller (%d) nor one of its descendants", pid, c.Pid)
	}
	live := 0
	for _, s := range reg.List() {
		if s.Live {
			live++
		}
	}
	if live >= MaxSessions {
		// EAGAIN: a resource limit that clears when a session ends.
		return "", ctltree.Errorf(syscall.EAGAIN, "%d live sessions: the limit is %d; end one first", live, MaxSessions)
	}
	if name == "" {
		name = "s-" + randomID()
	}
	if err := reg.RegisterAs(name, pid, sp.Cmd, sp.Harness); err != nil {
		return "", sessionErr(err)
	}
	return name, nil
}

// taskPrefix starts the names of task sessions, which only the task runner
// registers: a caller whose session is task-<id> may act as task <id>.
const taskPrefix = "task-"

// reservedName refuses names the control files may not give (EPERM).
func reservedName(name string) error {
	if strings.HasPrefix(name, taskPrefix) {
		return ctltree.Errorf(syscall.EPERM, "session names starting with %q are reserved for tasks (.rubino/agents)", taskPrefix)
	}
	return nil
}

// sessionErr maps the registry's errors to errnos.
func sessionErr(err error) error {
	errno := syscall.EINVAL
	switch {
	case errors.Is(err, guard.ErrSessionExists):
		errno = syscall.EEXIST
	case errors.Is(err, guard.ErrNoSession):
		errno = syscall.ENOENT
	case errors.Is(err, guard.ErrProcessGone):
		errno = syscall.ESRCH
	case errors.Is(err, guard.ErrAlreadyRooted):
		errno = syscall.EBUSY
	case errors.Is(err, guard.ErrProcessBusy):
		// EAGAIN: the process's /proc files did not answer in time (it
		// is in execve); the same write succeeds once the exec is over.
		errno = syscall.EAGAIN
	}
	return ctltree.Errorf(errno, "%v", err)
}

// sessionCmd is a parsed sessions/ctl write.
type sessionCmd struct {
	Verb string // "end" or "rename"
	Name string // the session acted on
	New  string // rename: the new name
}

// String renders the command in the form parseSessionCommand accepts.
func (c sessionCmd) String() string {
	if c.Verb == "rename" {
		return "rename " + c.Name + " " + c.New
	}
	return c.Verb + " " + c.Name
}

const sessionCmdUsage = "want `end NAME` or `rename OLD NEW`"

// parseSessionCommand parses "end NAME" or "rename OLD NEW" (fields split
// on white space). NAME and OLD are "default" or a valid session name;
// NEW must pass guard.ValidSessionName and not be reserved. Errors are
// *ctltree.Error: EFBIG over maxSessionCommand bytes, EPERM for a reserved
// new name, EINVAL with the reason for anything else.
func parseSessionCommand(line string) (sessionCmd, error) {
	if len(line) > maxSessionCommand {
		return sessionCmd{}, ctltree.Errorf(syscall.EFBIG, "session command of %d bytes exceeds the limit of %d bytes", len(line), maxSessionCommand)
	}
	if !utf8.ValidString(line) || strings.IndexByte(line, 0) >= 0 {
		return sessionCmd{}, ctltree.Errorf(syscall.EINVAL, "session command is not UTF-8 text without NUL bytes")
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return sessionCmd{}, ctltree.Errorf(syscall.EINVAL, "empty command: %s", sessionCmdUsage)
	}
	existing := func(name string) error {
		if name == DefaultSession {
			return nil
		}
		if err := guard.ValidSessionName(name); err != nil {
			return ctltree.Errorf(syscall.EINVAL, "%v", err)
		}
		return nil
	}
	switch {
	case fields[0] == "end" && len(fields) == 2:
		if err := existing(fields[1]); err != nil {
			return sessionCmd{}, err
		}
		return sessionCmd{Verb: "end", Name: fields[1]}, nil
	case fields[0] == "rename" && len(fields) == 3:
		if err := existing(fields[1]); err != nil {
			return sessionCmd{}, err
		}
		if err := guard.ValidSessionName(fields[2]); err != nil {
			return sessionCmd{}, ctltree.Errorf(syscall.EINVAL, "%v", err)
		}
		if err := reservedName(fields[2]); err != nil {
			return sessionCmd{}, err
		}
		return sessionCmd{Verb: "rename", Name: fields[1], New: fields[2]}, nil
	}
	return sessionCmd{}, ctltree.Errorf(syscall.EINVAL, "unknown command %q: %s", clipReason(line), sessionCmdUsage)
}

// sessionCommand runs "end NAME" or "rename OLD NEW".
func (f *FS) sessionCommand(reg SessionRegistry, c ctltree.Caller, line string) error {
	cmd, err := parseSessionCommand(line)
	if err != nil {
		return err
	}
	mayActOn := func(target string) error {
		if c.Session == target || (c.Session == DefaultSession && c.Privileged) {
			return nil
		}
		if c.Session == DefaultSession {
			return ctltree.Errorf(syscall.EPERM, "only the mount's owner may act on session %s", target)
		}
		return ctltree.Errorf(syscall.EPERM, "session %s may not act on session %s", c.Session, target)
	}
	if err := mayActOn(cmd.Name); err != nil {
		return err
	}
	switch cmd.Verb {
	case "end":
		if c.Session == cmd.Name && f.cfg.AllowUnregistered {
			return ctltree.Errorf(syscall.EPERM, "ending session %s would leave its processes unguarded (--unregistered allow)", cmd.Name)
		}
		if err := reg.End(cmd.Name); err != nil {
			return sessionErr(err)
		}
	case "rename":
		if err := reg.Rename(cmd.Name, cmd.New); err != nil {
			return sessionErr(err)
		}
		f.cfg.Guard.RenameSession(cmd.Name, cmd.New)
	}
	return nil
}

// sessionInfo renders sessions/<name>/info.
func (f *FS) sessionInfo(reg SessionRegistry, name string) string {
	doc := map[string]any{"name": name}
	if name == DefaultSession {
		doc["root_pid"] = 0
		doc["command"] = "(callers under no session)"
		doc["guarded"] = !f.cfg.AllowUnregistered
	}
	for _, s := range reg.List() {
		if s.Name == name {
			doc["root_pid"] = s.RootPid
			doc["command"] = s.Command
			doc["started"] = s.Started.UTC().Format(time.RFC3339Nano)
			doc["live"] = s.Live
			doc["guarded"] = true
			doc["harness"] = s.Harness
		}
	}
	doc["tracked"] = f.cfg.Guard.RecordCount(name)
	doc["denials"] = len(f.cfg.Guard.Denials(name))
	b, _ := json.MarshalIndent(doc, "", "  ")
	return string(b) + "\n"
}

// randomID returns 8 random hex digits.
func randomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
