package sessionctl

// Sessions not rooted at a process, through .rubino/sessions/clone
// (docs/DESIGN.md#cgroup-sessions):
//
//   cgroup=PATH [remove=1]  root a session at a cgroup ("self": the writer's
//                           own); remove=1 has the daemon remove the cgroup
//                           once it is empty again (rubinofs run --cgroup;
//                           only for cgroups named rubino-*)
//   keep=1                  a session with no root, kept until ended
//   join=NAME [pid=PID]     the writer (or PID) joins the live session NAME
//
// Authorisation follows the pid roots' (docs/DESIGN.md#sessions): any
// caller may root a session at a cgroup that holds only its own process
// and its descendants; the mount's owner (or root), from outside every
// session, at any cgroup. A caller outside every session may keep a
// session (owned by its uid), and join one it may act on (mayActOn: its
// uid's own, or any for the mount's owner and root), with its own process
// or a descendant: joining shares the session's reads, so never across
// uids.

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/sessions"
)

// CgroupRegistry is what the rootless fields of sessions/clone need from
// the session registry beyond Registry (sessions.Registry implements
// it). A registry without it refuses them with ENOTSUP.
type CgroupRegistry interface {
	// RegisterCgroupFor roots session name, owned by uid owner, at
	// cgroup cg (sessions.Registry.RegisterCgroupFor).
	RegisterCgroupFor(owner uint32, name, cg, cmd string, removeEmpty bool) error
	// RegisterKeptFor registers a session with no root, owned by uid
	// owner (sessions.Registry.RegisterKeptFor).
	RegisterKeptFor(owner uint32, name, cmd string) error
	// Join makes pid's process an extra root of session name (sessions.Registry.Join).
	Join(name string, pid uint32) error
	// CgroupOf returns pid's cgroup, bounded (sessions.Registry.CgroupOf).
	CgroupOf(pid uint32) (string, error)
	// CgroupProcs lists the processes of cg and below it, at most max
	// (sessions.Registry.CgroupProcs).
	CgroupProcs(cg string, max int) ([]uint32, error)
}

// RunCgroupPrefix starts the name of every cgroup `rubinofs run --cgroup`
// makes (RunCgroupPrefix + the session's name). remove=1, which has the
// daemon remove the cgroup once it is empty again, is refused (EINVAL)
// for any other cgroup: the daemon never removes a cgroup someone else
// made.
const RunCgroupPrefix = "rubino-"

// maxCgroupCheck bounds the processes a non-owner's cgroup registration
// checks, in processes: a cgroup holding more is refused (EPERM).
const maxCgroupCheck = 1024

// maxCgroupPath bounds a cgroup= value, in bytes (PATH_MAX).
const maxCgroupPath = 4096

// rootlessSpec holds the sessions/clone fields of a session rooted
// elsewhere than at a process.
type rootlessSpec struct {
	Cgroup      string // "self" or a cleaned absolute cgroup path; "" for none
	RemoveEmpty bool   // remove=1
	Keep        bool   // keep=1
	Join        string // join=NAME
}

// set reports whether any rootless field was given.
func (r rootlessSpec) set() bool { return r.Cgroup != "" || r.Keep || r.Join != "" }

// fields renders r as key=value fields, in the form parse accepts.
func (r rootlessSpec) fields() []string {
	var out []string
	if r.Cgroup != "" {
		out = append(out, "cgroup="+r.Cgroup)
	}
	if r.RemoveEmpty {
		out = append(out, "remove=1")
	}
	if r.Keep {
		out = append(out, "keep=1")
	}
	if r.Join != "" {
		out = append(out, "join="+r.Join)
	}
	return out
}

// parse takes one field k=v that parseSessionSpec does not know. Errors
// are *ctltree.Error: EINVAL with the reason.
func (r *rootlessSpec) parse(k, v string) error {
	flag := func() (bool, error) {
		if v != "0" && v != "1" {
			return false, ctltree.Errorf(syscall.EINVAL, "%s %q: want 0 or 1", k, ctltree.Clip(v))
		}
		return v == "1", nil
	}
	var err error
	switch k {
	case "cgroup":
		if v == "self" {
			r.Cgroup = v
			return nil
		}
		if len(v) > maxCgroupPath || strings.ContainsFunc(v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return ctltree.Errorf(syscall.EINVAL, "cgroup %q: want self or an absolute cgroup path", ctltree.Clip(v))
		}
		if r.Cgroup, err = sessions.CgroupPath(v, ""); err != nil {
			return ctltree.Errorf(syscall.EINVAL, "%v", err)
		}
	case "remove":
		r.RemoveEmpty, err = flag()
	case "keep":
		r.Keep, err = flag()
	case "join":
		if err := sessions.ValidName(v); err != nil {
			return ctltree.Errorf(syscall.EINVAL, "%v", err)
		}
		r.Join = v
	default:
		return ctltree.Errorf(syscall.EINVAL, "unknown field %q (want name, pid, harness, cmd, cgroup, remove, keep, join)", ctltree.Clip(k))
	}
	return err
}

// check refuses combinations that mean nothing (EINVAL): at most one of
// cgroup, keep and join; remove only with cgroup; pid only with join;
// harness with none of them; join with no name (it names the session).
func (r rootlessSpec) check(sp sessionSpec) error {
	n := 0
	for _, b := range []bool{r.Cgroup != "", r.Keep, r.Join != ""} {
		if b {
			n++
		}
	}
	switch {
	case n > 1:
		return ctltree.Errorf(syscall.EINVAL, "give at most one of cgroup, keep and join")
	case r.RemoveEmpty && r.Cgroup == "":
		return ctltree.Errorf(syscall.EINVAL, "remove=1 takes cgroup=")
	case n == 1 && sp.Harness:
		return ctltree.Errorf(syscall.EINVAL, "harness=1 takes a process root, not cgroup, keep or join")
	case sp.Pid != 0 && n == 1 && r.Join == "":
		return ctltree.Errorf(syscall.EINVAL, "pid= roots a session at a process: not with cgroup or keep")
	case r.Join != "" && sp.Name != "":
		return ctltree.Errorf(syscall.EINVAL, "join=NAME names the session: no name=")
	}
	return nil
}

// registerRootless serves a sessions/clone write with a rootless field.
func (s *Feature) registerRootless(c ctltree.Caller, sp sessionSpec) (string, error) {
	creg, ok := s.reg.(CgroupRegistry)
	if !ok {
		return "", ctltree.Errorf(syscall.ENOTSUP, "this mount's session registry has no cgroup, kept or joined sessions")
	}
	owner := s.owners.Admin(c)
	r := sp.Rootless
	if r.Join != "" {
		if !s.owners.Outside(c) {
			return "", ctltree.Errorf(syscall.EPERM, "only a caller outside every session may join a session (joining shares its reads)")
		}
		if err := s.owners.MayActOnErr(c, r.Join); err != nil {
			return "", err
		}
		pid := sp.Pid
		if pid == 0 {
			pid = c.Pid
		}
		if !owner && !s.reg.IsDescendant(pid, c.Pid) {
			return "", ctltree.Errorf(syscall.EPERM, "pid %d is neither the caller (%d) nor one of its descendants", pid, c.Pid)
		}
		if err := creg.Join(r.Join, pid); err != nil {
			return "", sessionErrnos.Map(err)
		}
		return r.Join, nil
	}
	if r.Keep && !s.owners.Outside(c) {
		return "", ctltree.Errorf(syscall.EPERM, "only a caller outside every session may keep a session with no root")
	}
	name := sp.Name
	if name == "" {
		name = "s-" + randomID()
	}
	if r.Keep {
		if err := creg.RegisterKeptFor(c.Uid, name, sp.Cmd); err != nil {
			return "", sessionErrnos.Map(err)
		}
		return name, nil
	}
	cg := r.Cgroup
	if cg == "self" {
		var err error
		if cg, err = creg.CgroupOf(c.Pid); err != nil {
			return "", sessionErrnos.Map(err)
		}
	}
	if r.RemoveEmpty && !strings.HasPrefix(path.Base(cg), RunCgroupPrefix) {
		return "", ctltree.Errorf(syscall.EINVAL, "remove=1 takes a cgroup made by rubinofs run --cgroup (named %s*), not %s", RunCgroupPrefix, ctltree.Clip(cg))
	}
	if !owner {
		if err := s.ownCgroup(creg, cg, c.Pid); err != nil {
			return "", err
		}
	}
	if err := creg.RegisterCgroupFor(c.Uid, name, cg, sp.Cmd, r.RemoveEmpty); err != nil {
		return "", sessionErrnos.Map(err)
	}
	return name, nil
}

// ownCgroup refuses (EPERM) a cgroup that holds a process other than
// pid's process and its descendants: rooting a session there would take
// in another's processes, which could then use the caller's reads.
func (s *Feature) ownCgroup(creg CgroupRegistry, cg string, pid uint32) error {
	procs, err := creg.CgroupProcs(cg, maxCgroupCheck)
	if err != nil {
		if errors.Is(err, sessions.ErrNoCgroup) || errors.Is(err, sessions.ErrInvalidCgroup) {
			return sessionErrnos.Map(err)
		}
		return ctltree.Errorf(syscall.EPERM, "%v", err)
	}
	for _, p := range procs {
		if !s.reg.IsDescendant(p, pid) {
			return ctltree.Errorf(syscall.EPERM, "cgroup %s holds pid %d, which is neither the caller (%d) nor one of its descendants", ctltree.Clip(cg), p, pid)
		}
	}
	return nil
}

// rootInfo adds what sessions/<name>/info says about the root of si:
// root_kind (pid, cgroup or none) and, for a cgroup, root_path; keep and
// auto when set.
func rootInfo(doc map[string]any, si sessions.Info) {
	doc["root_kind"] = si.RootKind()
	switch si.RootKind() {
	case "cgroup":
		doc["root_path"] = si.Cgroup
	case "pid":
		doc["root_path"] = fmt.Sprintf("/proc/%d", si.RootPid)
	}
	if si.Keep {
		doc["keep"] = true
	}
	if si.Auto {
		doc["auto"] = true
	}
}
