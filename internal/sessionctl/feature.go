// Package sessionctl is the sessions' control files, .rubino/sessions/
// and .rubino/self, plugged into the control tree as one ctltree.Feature
// (docs/DESIGN.md#sessions, docs/DESIGN.md#ctl-room), and the session
// ownership of a mount (Owners) that decides who may see or act on a
// session. It reaches the mount only through Host, which package fusefs
// implements; it never imports the FUSE adapter.
//
//	sessions/clone     write "name=NAME pid=PID harness=1 cmd=COMMAND" (each
//	                   optional; the name defaults to a generated id, the
//	                   pid to the writer's), read the id; "cgroup=PATH",
//	                   "keep=1" and "join=NAME" root a session at a cgroup,
//	                   keep one with no root, or join one (cgroup.go)
//	sessions/ctl       "end NAME", "rename OLD NEW"
//	sessions/<id>/     info (JSON), tracked, denials, why (Host.GuardFiles),
//	                   ctl (self.go), readtool (readtool.go), and the plugged session features'
//	                   files (checkpoints, changes, journal:
//	                   internal/journalctl); a session known only by its
//	                   journal log has those three alone (not listed)
//	self               symlink to sessions/<caller's session>
//
// Authorisation (docs/DESIGN.md#sessions): a session belongs to the uid
// that registered it, and Owners.MayActOn (owners.go) decides who may
// see or act on it: its own processes; from outside every session, its
// owner's uid; the mount's owner and root from outside every session. A
// session can never loosen its own guard or another's:
//   - Any caller may make its own process, or one of its descendants, the
//     root of a new session owned by its uid: a new session has read
//     nothing, so this only tightens. The mount's owner (or root) from
//     outside every session may register any process.
//   - A session may end or rename itself, except that ending itself under
//     --unregistered allow would leave its processes unguarded: EPERM.
//   - sessions/NAME/ and the end and rename verbs answer only callers
//     MayActOn allows; the sessions/ listing shows only those sessions.
//   - Each uid has at most sessions.DefaultMaxPerOwner live sessions (EAGAIN).
//   - Names are never "default", "default-UID" or an existing session's
//     (joining a session would share its reads): EEXIST.
package sessionctl

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/internal/ctlhost"
	"github.com/rubinofs/rubinofs/sessions"
)

// Registry is what the session control files need from the session
// registry (sessions.Registry implements it). Every method is safe for
// concurrent use.
type Registry interface {
	// RegisterFor registers pid as the root of session name owned by uid
	// owner, an agent harness when harness is set
	// (sessions.Registry.RegisterFor).
	RegisterFor(owner uint32, name string, pid uint32, cmd string, harness bool) error
	// OwnerOf returns the owner uid of a live or listed session
	// (sessions.Registry.OwnerOf).
	OwnerOf(name string) (uint32, bool)
	End(name string) error
	Rename(oldName, newName string) error
	List() []sessions.Info
	IsDescendant(pid, ancestor uint32) bool
}

// Host is what the session control files need from the mount beyond
// ctlhost.Host; package fusefs implements it. Every method is safe for
// concurrent use and never waits on the calling process
// (docs/DESIGN.md#no-wait-on-caller).
type Host interface {
	ctlhost.Host
	// Owners is the mount's session ownership, the one its callers
	// resolve with (ctlhost.Host.MayActOn asks it too).
	Owners() *Owners
	// SessionFeatures are the plugged ctltree.SessionFeatures, in
	// plugging order: their files follow the session's own in its
	// directory, and their verbs come first in sessions/NAME/ctl.
	SessionFeatures() []ctltree.SessionFeature
	// GuardFiles are session's guard files, as .rubino/guard/ has them
	// for the caller's own session: tracked, denials, denials.summary
	// and why, in that order.
	GuardFiles(session string) []ctltree.Entry
	// LookupTarget stats the workspace-relative path rel beneath the
	// backing root, following no symlink (ELOOP for one on the way), and
	// returns its guard target. Errors: a syscall.Errno.
	LookupTarget(rel string) (guard.Target, error)
	// Readable reports whether c could open rel for reading itself
	// (docs/DESIGN.md#as-caller): nil, or the refusal (EACCES, or the
	// errno of the check) with its reason.
	Readable(c ctltree.Caller, rel string) *ctltree.Error
}

// Config configures the sessions feature.
type Config struct {
	// Registry is the session registry the files drive. Required.
	Registry Registry
	// Guard holds the sessions' read records and denials. Required.
	Guard *guard.Guard
	// AllowUnregistered is --unregistered allow: the default sessions
	// are unguarded, and a session may not end itself.
	AllowUnregistered bool
}

// Feature is .rubino/sessions and .rubino/self over one session registry:
// a ctltree.Feature, plugged with fusefs.FS.Plug before mounting. Safe for
// concurrent use.
type Feature struct {
	cfg    Config
	reg    Registry
	host   Host
	owners *Owners
}

var _ ctltree.Feature = (*Feature)(nil)

// New returns the sessions feature over cfg and host.
func New(cfg Config, host Host) *Feature {
	return &Feature{cfg: cfg, reg: cfg.Registry, host: host, owners: host.Owners()}
}

// CtlEntries builds .rubino/sessions and .rubino/self.
func (s *Feature) CtlEntries() []ctltree.Entry {
	reg, owners := s.reg, s.owners
	perSession := func(name string) ctltree.Node {
		entries := []ctltree.Entry{{Name: "info", Node: ctltree.Text(func(ctltree.Caller) string { return s.info(name) })}}
		entries = append(entries, s.host.GuardFiles(name)...)
		entries = append(entries, ctltree.Entry{Name: "ctl", Node: &ctltree.File{Kind: ctltree.Ctl, Write: s.selfCtl(name)}},
			ctltree.Entry{Name: "readtool", Node: &ctltree.File{Kind: ctltree.Clone, Clone: s.readTool(name)}}) // readtool.go
		return ctltree.NewDir(append(entries, s.sessionFeatEntries(name)...)...) // the journal's (docs/DESIGN.md#ctl-room)
	}
	// names lists the sessions c may see (MayActOn): the default
	// sessions, then the registry's.
	names := func(c ctltree.Caller) []string {
		var out []string
		seen := map[string]bool{}
		add := func(name string) {
			if !seen[name] && owners.MayActOn(c, name) {
				seen[name] = true
				out = append(out, name)
			}
		}
		add(sessions.Default)
		add(c.Session)
		defs := owners.Defaults()
		sort.Strings(defs)
		for _, n := range defs {
			add(n)
		}
		for _, si := range reg.List() {
			add(si.Name)
		}
		return out
	}
	dir := &ctltree.Dir{
		Entries: []ctltree.Entry{
			{Name: "clone", Node: &ctltree.File{Kind: ctltree.Clone, Clone: s.register}},
			{Name: "ctl", Node: &ctltree.File{Kind: ctltree.Ctl, Write: func(c ctltree.Caller, cmd []byte) error {
				return s.command(c, string(cmd))
			}}},
		},
		List: func(c ctltree.Caller) []string { return names(c) },
		Lookup: func(c ctltree.Caller, name string) ctltree.Node {
			if !owners.MayActOn(c, name) {
				return nil // ENOENT: not this caller's to see
			}
			for _, n := range names(c) {
				if n == name {
					return perSession(name)
				}
			}
			// A session the registry no longer knows (ended and
			// forgotten, or from before a restart of the daemon) keeps
			// its journal: those files alone, not listed.
			var kept []ctltree.Entry
			for _, sf := range s.host.SessionFeatures() {
				if sf.KeepsSession(name) {
					kept = append(kept, sf.SessionEntries(name)...)
				}
			}
			if kept != nil {
				return ctltree.NewDir(kept...)
			}
			return nil
		},
	}
	self := &ctltree.Symlink{Target: func(c ctltree.Caller) string { return "sessions/" + c.Session }}
	return []ctltree.Entry{{Name: "sessions", Node: dir}, {Name: "self", Node: self}}
}

// sessionFeatEntries are the plugged session features' files in session
// name's directory, in plugging order.
func (s *Feature) sessionFeatEntries(name string) []ctltree.Entry {
	var out []ctltree.Entry
	for _, sf := range s.host.SessionFeatures() {
		out = append(out, sf.SessionEntries(name)...)
	}
	return out
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
	// MaxSessions is the default bound of the live sessions of one owner
	// uid, in entries (sessions.max_live sets sessions.Registry.MaxPerOwner):
	// a registration beyond it fails with EAGAIN until one of that uid's
	// ends (each live session holds a pidfd and a goroutine in the
	// daemon). Another uid's sessions never count.
	MaxSessions = sessions.DefaultMaxPerOwner
)

// sessionSpec is a parsed sessions/clone write.
type sessionSpec struct {
	Name string // "" for a generated name
	Pid  uint32 // 0 for the caller's own pid
	Cmd  string // display only, at most maxSessionCmd bytes
	// Harness marks the root as an agent harness (harness=1): its own
	// reads do not count (docs/DESIGN.md#scanner-reads).
	Harness bool
	// Rootless are the fields of sessions rooted elsewhere than at a
	// process: cgroup=, remove=, keep=, join= (cgroup.go).
	Rootless rootlessSpec
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
	parts = append(parts, s.Rootless.fields()...)
	if s.Cmd != "" {
		parts = append(parts, "cmd="+s.Cmd)
	}
	return strings.Join(parts, " ")
}

// parseSessionSpec parses "name=NAME pid=PID cmd=COMMAND": space-separated
// key=value fields, each at most once and each optional; cmd takes the rest
// of the input (it may hold spaces and newlines) and is clipped to
// maxSessionCmd bytes. A name must pass sessions.ValidName and not be
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
			return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "malformed field %q: want key=value (name, pid, cmd)", ctltree.Clip(field))
		}
		if seen[k] {
			return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "field %q given twice", ctltree.Clip(k))
		}
		seen[k] = true
		switch k {
		case "name":
			if err := sessions.ValidName(v); err != nil {
				return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "%v", err)
			}
			if err := reservedName(v); err != nil {
				return sessionSpec{}, err
			}
			out.Name = v
		case "pid":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "pid %q is not a process id", ctltree.Clip(v))
			}
			out.Pid = uint32(n)
		case "cmd":
			out.Cmd = clipText(strings.TrimSpace(v), maxSessionCmd)
		case "harness":
			if v != "0" && v != "1" {
				return sessionSpec{}, ctltree.Errorf(syscall.EINVAL, "harness %q: want 0 or 1", ctltree.Clip(v))
			}
			out.Harness = v == "1"
		default:
			if err := out.Rootless.parse(k, v); err != nil {
				return sessionSpec{}, err
			}
		}
	}
	if err := out.Rootless.check(out); err != nil {
		return sessionSpec{}, err
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

// register registers the session a sessions/clone write asks for.
func (s *Feature) register(c ctltree.Caller, spec []byte) (string, error) {
	reg := s.reg
	sp, err := parseSessionSpec(spec)
	if err != nil {
		return "", err
	}
	if sp.Rootless.set() {
		return s.registerRootless(c, sp) // cgroup.go
	}
	name, pid := sp.Name, sp.Pid
	if pid == 0 {
		pid = c.Pid
	}
	if !s.owners.Admin(c) && !reg.IsDescendant(pid, c.Pid) {
		return "", ctltree.Errorf(syscall.EPERM, "pid %d is neither the caller (%d) nor one of its descendants", pid, c.Pid)
	}
	if name == "" {
		name = "s-" + randomID()
	}
	if err := reg.RegisterFor(c.Uid, name, pid, sp.Cmd, sp.Harness); err != nil {
		return "", sessionErrnos.Map(err)
	}
	return name, nil
}

// reservedName refuses names the control files may not give (EPERM):
// those of tasks and of the sessions of processes that left theirs.
func reservedName(name string) error {
	if strings.HasPrefix(name, sessions.TaskPrefix) {
		return ctltree.Errorf(syscall.EPERM, "session names starting with %q are reserved for tasks (.rubino/agents)", sessions.TaskPrefix)
	}
	if strings.HasPrefix(name, sessions.LeftPrefix) {
		return ctltree.Errorf(syscall.EPERM, "session names starting with %q are reserved for processes that left their session", sessions.LeftPrefix)
	}
	return nil
}

// sessionErrnos maps the registry's errors to errnos: EEXIST for a taken
// name, ENOENT for no such session, ESRCH for a process that is gone, EBUSY
// for a process already a session's root, EAGAIN for a process whose /proc
// files did not answer in time (it is in execve; the same write succeeds
// once the exec is over), EINVAL for anything else. The registry waits on
// no context, so the table's common tail (a cancelled request → EINTR)
// never applies here.
var sessionErrnos = ctltree.ErrnoTable{
	Rules: []ctltree.ErrnoRule{
		ctltree.Is(sessions.ErrSessionExists, syscall.EEXIST),
		ctltree.Is(sessions.ErrNoSession, syscall.ENOENT),
		ctltree.Is(sessions.ErrProcessGone, syscall.ESRCH),
		ctltree.Is(sessions.ErrAlreadyRooted, syscall.EBUSY),
		ctltree.Is(sessions.ErrProcessBusy, syscall.EAGAIN),
		ctltree.Is(sessions.ErrNoCgroup, syscall.ENOENT),
		ctltree.Is(sessions.ErrTooManySessions, syscall.EAGAIN),
	},
	Default: syscall.EINVAL,
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
// NEW must pass sessions.ValidName and not be reserved. Errors are
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
		if name == sessions.Default {
			return nil
		}
		if err := sessions.ValidName(name); err != nil {
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
		if err := sessions.ValidName(fields[2]); err != nil {
			return sessionCmd{}, ctltree.Errorf(syscall.EINVAL, "%v", err)
		}
		if err := reservedName(fields[2]); err != nil {
			return sessionCmd{}, err
		}
		return sessionCmd{Verb: "rename", Name: fields[1], New: fields[2]}, nil
	}
	return sessionCmd{}, ctltree.Errorf(syscall.EINVAL, "unknown command %q: %s", ctltree.Clip(line), sessionCmdUsage)
}

// command runs "end NAME" or "rename OLD NEW".
func (s *Feature) command(c ctltree.Caller, line string) error {
	reg := s.reg
	cmd, err := parseSessionCommand(line)
	if err != nil {
		return err
	}
	if err := s.owners.MayActOnErr(c, cmd.Name); err != nil {
		return err
	}
	switch cmd.Verb {
	case "end":
		if c.Session == cmd.Name && s.cfg.AllowUnregistered {
			return ctltree.Errorf(syscall.EPERM, "ending session %s would leave its processes unguarded (--unregistered allow)", cmd.Name)
		}
		if err := reg.End(cmd.Name); err != nil {
			return sessionErrnos.Map(err)
		}
	case "rename":
		if err := reg.Rename(cmd.Name, cmd.New); err != nil {
			return sessionErrnos.Map(err)
		}
		s.cfg.Guard.RenameSession(cmd.Name, cmd.New)
	}
	return nil
}

// info renders sessions/<name>/info.
func (s *Feature) info(name string) string {
	doc := map[string]any{"name": name}
	if uid, ok := sessions.DefaultUID(name, s.owners.MountOwner()); ok {
		doc["root_pid"] = 0
		doc["owner"] = uid
		doc["command"] = fmt.Sprintf("(callers of uid %d under no session)", uid)
		doc["guarded"] = !s.cfg.AllowUnregistered
	}
	// The live session of the name, else the latest that ended (List:
	// the live ones, then the ended ones oldest first).
	var si sessions.Info
	found := false
	for _, e := range s.reg.List() {
		if e.Name == name && !(found && si.Live) {
			si, found = e, true
		}
	}
	if found {
		doc["owner"] = si.Owner
		doc["root_pid"] = si.RootPid
		doc["command"] = si.Command
		doc["started"] = si.Started.UTC().Format(time.RFC3339Nano)
		doc["live"] = si.Live
		doc["guarded"] = true
		doc["harness"] = si.Harness
		rootInfo(doc, si) // cgroup.go: root_kind, root_path
	}
	doc["tracked"] = s.cfg.Guard.RecordCount(name)
	// Every refusal since the mount, not the lines the log still holds
	// (docs/DESIGN.md#denial-summary).
	den, warn := s.cfg.Guard.DenialCount(name)
	doc["denials"], doc["warnings"] = den, warn
	b, _ := json.MarshalIndent(doc, "", "  ")
	return string(b) + "\n"
}

// randomID returns 8 random hex digits.
func randomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
