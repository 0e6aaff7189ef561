package tasks

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
)

// The mount owner of the authority tests, and the callers of the table in
// docs/DESIGN.md#task-authority.
const testOwner = 1000

var (
	ownerOut = ctltree.Caller{Uid: testOwner, Session: "default", Privileged: true, Pid: 1}
	rootOut  = ctltree.Caller{Uid: 0, Session: "default-0", Privileged: true, Pid: 1}
	nobody   = ctltree.Caller{Uid: 65534, Session: "default-65534", Pid: 1}
	// nobodyShared is nobody where every uid outside a session shares
	// "default": its uid still decides.
	nobodyShared = ctltree.Caller{Uid: 65534, Session: "default", Pid: 1}
	rootInRun    = ctltree.Caller{Uid: 0, Session: "run-1", Privileged: true, Pid: 1}
	ownerInRun   = ctltree.Caller{Uid: testOwner, Session: "run-1", Privileged: true, Pid: 1}
	ownerInRun2  = ctltree.Caller{Uid: testOwner, Session: "run-2", Privileged: true, Pid: 1}
	nobodyInRun  = ctltree.Caller{Uid: 65534, Session: "run-3", Pid: 1}
)

func callerName(c ctltree.Caller) string {
	return c.Session + "/uid=" + strconv.FormatUint(uint64(c.Uid), 10)
}

// TestFilesAuthorityTable walks the rule of docs/DESIGN.md#task-authority
// as a table: for each caller, the tasks agents/ lists, tree and waiting
// show, lookups resolve and stop and approve accept; every other task is
// ENOENT on lookup and EPERM on a handle resolved before.
func TestFilesAuthorityTable(t *testing.T) {
	rn := newRunner(t, func(c *Config) {
		c.MountOwner = testOwner
		c.Caps = Caps{MaxDepth: 3, MaxChildrenPerNode: 8, MaxConcurrentTotal: 16}
	})
	playCallers(rn)
	ownerTask := mustClone(t, rn, ownerOut, "exec sleep 1000")
	ownerKid, err := cloneAs(t, rn, asTask(ownerTask), "subagent=sh\nprompt=exec sleep 1000")
	if err != nil {
		t.Fatal(err)
	}
	nobodyTask := mustClone(t, rn, nobody, "exec sleep 1000")
	// The child of nobody's task is nobody's, whatever uid its task runs as.
	nobodyKid, err := cloneAs(t, rn, ctltree.Caller{Uid: 0, Session: SessionName(nobodyTask)}, "subagent=sh\nprompt=exec sleep 1000")
	if err != nil {
		t.Fatal(err)
	}
	runTask := mustClone(t, rn, rootInRun, "exec sleep 1000")
	if tk, _ := rn.Registry().Find(nobodyKid); tk.OwnerUid != 65534 || tk.RootSession != "default-65534" {
		t.Fatalf("nobody's grandchild: owner uid %d, root session %q", tk.OwnerUid, tk.RootSession)
	}
	all := []string{ownerTask, ownerKid, nobodyTask, nobodyKid, runTask}
	for _, row := range []struct {
		c    ctltree.Caller
		acts []string // the tasks c may act on
		sees []string // plus the ones it only sees (itself)
	}{
		{ownerOut, all, nil},
		{rootOut, all, nil},
		{nobody, []string{nobodyTask, nobodyKid}, nil},
		{nobodyShared, []string{nobodyTask, nobodyKid}, nil},
		{rootInRun, []string{runTask}, nil},
		{ownerInRun, []string{runTask}, nil},
		{ownerInRun2, nil, nil},
		{nobodyInRun, nil, nil},
		{asTask(ownerTask), []string{ownerKid}, []string{ownerTask}},
		{asTask(ownerKid), nil, []string{ownerKid}},
		{asTask(nobodyTask), []string{nobodyKid}, []string{nobodyTask}},
	} {
		name := callerName(row.c)
		sees := append(slices.Clone(row.acts), row.sees...)
		listed := rn.Node().List(row.c)
		slices.Sort(listed)
		want := slices.Clone(sees)
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			t.Errorf("%s lists %v, want %v", name, listed, want)
		}
		tree := mustRead(t, rn, row.c, "tree")
		for _, id := range all {
			shown := strings.Contains("\n"+tree, " "+id+" running ")
			if shown != slices.Contains(sees, id) {
				t.Errorf("%s: task %s in tree = %v; tree %q", name, id, shown, tree)
			}
			_, err := rd(t, rn, row.c, id+"/prompt")
			if slices.Contains(sees, id) != (err == nil) {
				t.Errorf("%s reading %s/prompt: %v", name, id, err)
			}
			if !slices.Contains(sees, id) && ctltree.ErrnoOf(err) != syscall.ENOENT {
				t.Errorf("%s reading another's %s/prompt: %v, want ENOENT", name, id, err)
			}
			// A handle resolved by the owner, then used by this caller.
			f, _ := lookupFile(t, rn, ownerOut, id+"/log")
			if _, err := f.Read(t.Context(), row.c); !slices.Contains(sees, id) && ctltree.ErrnoOf(err) != syscall.EPERM {
				t.Errorf("%s reading another's %s/log through a resolved handle: %v, want EPERM", name, id, err)
			}
			err = wr(t, rn, row.c, id+"/ctl", "steer hello")
			if slices.Contains(row.acts, id) != (err == nil) {
				t.Errorf("%s steering %s: %v", name, id, err)
			}
		}
	}
	// approve: the same callers when not a task.
	for _, c := range []ctltree.Caller{nobody, rootInRun, asTask(ownerTask)} {
		if err := wr(t, rn, c, ownerKid+"/ctl", "approve yes"); !refused(err) {
			t.Errorf("%s approving %s: %v", callerName(c), ownerKid, err)
		}
	}
	wantErrno(t, wr(t, rn, nobody, nobodyKid+"/ctl", "approve yes"), syscall.EINVAL, "no pending approval")
	// stop: refused to another uid, accepted from the task's uid.
	if err := wr(t, rn, nobodyShared, ownerTask+"/ctl", "stop"); !refused(err) {
		t.Fatalf("nobody stopping the owner's task: %v", err)
	}
	if err := wr(t, rn, rootInRun, ownerTask+"/ctl", "stop"); !refused(err) {
		t.Fatalf("root in a session stopping the owner's task: %v", err)
	}
	if tk, _ := rn.Registry().Find(ownerTask); tk.Status != StatusRunning {
		t.Fatalf("owner's task %s", tk.Status)
	}
	if err := wr(t, rn, nobody, nobodyTask+"/ctl", "stop"); err != nil {
		t.Fatalf("nobody stopping its own task: %v", err)
	}
	waitDone(t, rn, nobodyTask)
}

// TestCapsPerOwnerPerUid: outside every session the per_owner cap counts
// per uid, so one uid filling it leaves another's spawns alone, even where
// every uid shares the session "default" (docs/DESIGN.md#task-caps).
func TestCapsPerOwnerPerUid(t *testing.T) {
	rn := newRunner(t, func(c *Config) {
		c.MountOwner = testOwner
		c.Caps = Caps{MaxChildrenPerNode: 2, MaxConcurrentTotal: 8}
	})
	playCallers(rn)
	mustClone(t, rn, nobodyShared, "exec sleep 1000")
	mustClone(t, rn, nobodyShared, "exec sleep 1000")
	_, err := cloneAs(t, rn, nobodyShared, "subagent=sh\nprompt=true")
	wantErrno(t, err, syscall.EAGAIN, "per_owner: uid 65534 already has 2 live children")
	_, err = cloneAs(t, rn, nobody, "subagent=sh\nprompt=true")
	wantErrno(t, err, syscall.EAGAIN, "per_owner: uid 65534")
	mustClone(t, rn, ownerOut, "exec sleep 1000")
	mustClone(t, rn, ownerOut, "exec sleep 1000")
	// A session counts on its own, whatever its uid.
	mustClone(t, rn, nobodyInRun, "exec sleep 1000")
}

// playCallers lets the test's made-up callers (other uids, pid 1) spawn:
// their tasks run as the test process itself, which SpawnerOf would refuse
// (the named process is not the caller). The authority rule under test
// uses the caller's uid and session, not the process.
func playCallers(rn *Runner) {
	rn.spawnerOf = func(ctltree.Caller) (*Spawner, error) { return nil, nil }
}
