package fusefs

// Session control files (issue 4): .rubino/sessions/ and .rubino/self.
//
//   sessions/clone     write "name=NAME pid=PID cmd=COMMAND" (each optional but
//                      pid; the name defaults to a generated id), read the id
//   sessions/ctl       "end NAME", "rename OLD NEW"
//   sessions/<id>/     info (JSON), tracked, denials, why
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
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// SessionRegistry is what the session control files need from the session
// registry (guard.Sessions implements it).
type SessionRegistry interface {
	Resolver
	Register(name string, pid uint32, cmd string) error
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

// maxSessionSpec bounds a registration spec, in bytes.
const maxSessionSpec = 4096

// registerSession parses "name=NAME pid=PID cmd=COMMAND" (cmd takes the rest
// of the line) and registers the session.
func (f *FS) registerSession(reg SessionRegistry, c ctltree.Caller, spec []byte) (string, error) {
	if len(spec) > maxSessionSpec {
		return "", ctltree.Errorf(syscall.EINVAL, "session spec longer than %d bytes", maxSessionSpec)
	}
	line := strings.TrimSpace(string(spec))
	var name, cmd string
	var pid uint32
	for line != "" {
		var field string
		if strings.HasPrefix(line, "cmd=") {
			field, line = line, ""
		} else {
			field, line, _ = strings.Cut(line, " ")
			line = strings.TrimSpace(line)
		}
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return "", ctltree.Errorf(syscall.EINVAL, "malformed field %q: want key=value (name, pid, cmd)", field)
		}
		switch k {
		case "name":
			name = v
		case "pid":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return "", ctltree.Errorf(syscall.EINVAL, "pid %q is not a process id", v)
			}
			pid = uint32(n)
		case "cmd":
			cmd = v
		default:
			return "", ctltree.Errorf(syscall.EINVAL, "unknown field %q (want name, pid, cmd)", k)
		}
	}
	if pid == 0 {
		pid = c.Pid
	}
	owner := c.Session == DefaultSession && c.Privileged
	if !owner && !reg.IsDescendant(pid, c.Pid) {
		return "", ctltree.Errorf(syscall.EPERM, "pid %d is neither the caller (%d) nor one of its descendants", pid, c.Pid)
	}
	if name == "" {
		name = "s-" + randomID()
	}
	if err := reservedName(name); err != nil {
		return "", err
	}
	if err := reg.Register(name, pid, cmd); err != nil {
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
	}
	return ctltree.Errorf(errno, "%v", err)
}

// sessionCommand runs "end NAME" or "rename OLD NEW".
func (f *FS) sessionCommand(reg SessionRegistry, c ctltree.Caller, line string) error {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return ctltree.Errorf(syscall.EINVAL, "empty command: want `end NAME` or `rename OLD NEW`")
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
	switch {
	case fields[0] == "end" && len(fields) == 2:
		if err := mayActOn(fields[1]); err != nil {
			return err
		}
		if c.Session == fields[1] && f.cfg.AllowUnregistered {
			return ctltree.Errorf(syscall.EPERM, "ending session %s would leave its processes unguarded (--unregistered allow)", fields[1])
		}
		if err := reg.End(fields[1]); err != nil {
			return sessionErr(err)
		}
		return nil
	case fields[0] == "rename" && len(fields) == 3:
		if err := mayActOn(fields[1]); err != nil {
			return err
		}
		if err := reservedName(fields[2]); err != nil {
			return err
		}
		if err := reg.Rename(fields[1], fields[2]); err != nil {
			return sessionErr(err)
		}
		f.cfg.Guard.RenameSession(fields[1], fields[2])
		return nil
	}
	return ctltree.Errorf(syscall.EINVAL, "unknown command %q: want `end NAME` or `rename OLD NEW`", line)
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
