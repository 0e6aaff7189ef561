package tasks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
)

// stepClock makes r's clock advance one second per reading, so finish
// times are distinct and ordered by the order of the Complete calls.
func stepClock(r *Registry) {
	var mu sync.Mutex
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

func ids(ts []Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func listed(r *Registry) []string {
	out := ids(r.List())
	slices.Sort(out)
	return out
}

func TestPruneKeepsTheLastFinishedAndRemovesTheOldestFirst(t *testing.T) {
	r := NewRegistry(Caps{MaxChildrenPerNode: 100, MaxConcurrentTotal: 100})
	stepClock(r)
	var all []Task
	for i := 0; i < 6; i++ {
		all = append(all, mustReserve(t, r, "", "s"))
	}
	live := all[5]
	// Finish out of reservation order: 3, 1, 4, 2, 5 (ids are 1-based).
	for _, i := range []int{2, 0, 3, 1, 4} {
		r.Complete(all[i].ID, StatusDone, "r"+all[i].ID, "")
	}
	if got := r.Prune(10); got != nil {
		t.Fatalf("under the limit, Prune removed %v", ids(got))
	}
	got := r.Prune(2)
	// The oldest finished go first (by finish time, not by id), and the
	// two that finished last (2 and 5) stay; the live task 6 stays.
	if want := []string{"3", "1", "4"}; !slices.Equal(ids(got), want) {
		t.Fatalf("removed %v, want %v in that order", ids(got), want)
	}
	if got[0].Status != StatusDone || got[0].Result != "r3" {
		t.Errorf("removed snapshot %+v lacks the outcome", got[0])
	}
	if want := []string{"2", "5", live.ID}; !slices.Equal(listed(r), want) {
		t.Fatalf("listed %v, want %v", listed(r), want)
	}
	for _, id := range []string{"1", "3", "4"} {
		if _, ok := r.Find(id); ok {
			t.Errorf("pruned task %s is still found", id)
		}
		if r.Done(id) != nil {
			t.Errorf("pruned task %s still has a done channel", id)
		}
		if _, err := r.Await(context.Background(), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Await of pruned task %s: %v, want ErrNotFound", id, err)
		}
	}
	// Late events for a pruned task are no-ops, not panics.
	r.RecordToolOutput("1", "x\n")
	r.RecordToolFinished("1", "x")
	if r.Steer("1", "x") || r.SetResult("1", "x") || r.Complete("1", StatusDone, "", "") != nil {
		t.Error("a pruned task accepted an event")
	}
	// keep < 1 counts as 1: the task that finished last stays.
	r.Complete(live.ID, StatusFailed, "", "boom")
	if got := r.Prune(0); !slices.Equal(ids(got), []string{"2", "5"}) || !slices.Equal(listed(r), []string{live.ID}) {
		t.Fatalf("Prune(0) removed %v, left %v", ids(got), listed(r))
	}
}

func TestPruneNeverRemovesLiveTasksOrTheLineageOfOne(t *testing.T) {
	r := NewRegistry(Caps{MaxDepth: 4, MaxChildrenPerNode: 100, MaxConcurrentTotal: 100})
	stepClock(r)
	a := mustReserve(t, r, "", "s")   // 1: finished, grandparent of a live task
	b := mustReserve(t, r, a.ID, "")  // 2: finished, parent of a live task
	c := mustReserve(t, r, b.ID, "")  // 3: live
	d := mustReserve(t, r, "", "s")   // 4: finished, no live descendant
	e := mustReserve(t, r, "", "s")   // 5: finished last
	w := mustReserve(t, r, "", "s")   // 6: parked on an approval (live)
	st := mustReserve(t, r, "", "s")  // 7: stopping (live)
	fd := mustReserve(t, r, d.ID, "") // 8: finished child of d
	if _, err := r.BeginApproval(w.ID, NewGate(), 1, "may I?", "rm x"); err != nil {
		t.Fatal(err)
	}
	r.RequestStop(st.ID)
	for _, x := range []Task{fd, a, b, d, e} {
		r.Complete(x.ID, StatusDone, "", "")
	}
	got := r.Prune(1)
	// a and b are older than d but kept: c descends from them. fd and d
	// go (d's only descendant has finished); e finished last.
	if want := []string{fd.ID, d.ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("removed %v, want %v", ids(got), want)
	}
	if want := []string{a.ID, b.ID, c.ID, e.ID, w.ID, st.ID}; !slices.Equal(listed(r), want) {
		t.Fatalf("listed %v, want %v", listed(r), want)
	}
	// The lineage still answers: c's owner chain and the tree queries.
	if !r.IsDescendant(a.ID, c.ID) || !slices.Equal(ids(r.AncestorsOf(c.ID)), []string{b.ID, a.ID}) {
		t.Fatalf("c's lineage broke: ancestors %v", ids(r.AncestorsOf(c.ID)))
	}
	if got := r.Prune(1); got != nil {
		t.Fatalf("a second Prune removed %v", ids(got))
	}
	// Once the live descendant finishes, its ancestors go too; the live
	// ones never do.
	r.Complete(c.ID, StatusDone, "", "")
	if got := r.Prune(1); !slices.Equal(ids(got), []string{a.ID, b.ID, e.ID}) {
		t.Fatalf("after c finished, removed %v", ids(got))
	}
	if want := []string{c.ID, w.ID, st.ID}; !slices.Equal(listed(r), want) {
		t.Fatalf("listed %v, want %v", listed(r), want)
	}
}

func TestAwaitKeepsTheOutcomeOfATaskPrunedWhileParked(t *testing.T) {
	r := NewRegistry(Caps{})
	stepClock(r)
	x := mustReserve(t, r, "", "s")
	y := mustReserve(t, r, "", "s")
	wait, err := r.watch(x.ID) // parked from here on
	if err != nil {
		t.Fatal(err)
	}
	r.Complete(x.ID, StatusFailed, "", "exit status 3")
	r.Complete(y.ID, StatusDone, "ok", "")
	if got := r.Prune(1); !slices.Equal(ids(got), []string{x.ID}) {
		t.Fatalf("removed %v", ids(got))
	}
	tk, err := wait(context.Background())
	if err != nil || tk.Status != StatusFailed || tk.Error != "exit status 3" {
		t.Fatalf("parked reader got %+v, %v", tk, err)
	}
	// A reader arriving after the prune gets ErrNotFound; one whose context
	// ends before the task finishes gets the context's error.
	if _, err := r.Await(context.Background(), x.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("late reader: %v", err)
	}
	z := mustReserve(t, r, "", "s")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Await(ctx, z.ID); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader: %v", err)
	}
}

func TestUndeliveredNotesKeptAreBounded(t *testing.T) {
	r := NewRegistry(Caps{})
	x := mustReserve(t, r, "", "s")
	note := strings.Repeat("n", MaxCtl)
	for i := 0; i < MaxQueuedNotes; i++ {
		if !r.Steer(x.ID, note) {
			t.Fatal("steer refused")
		}
	}
	if got := r.Complete(x.ID, StatusDone, "", ""); len(got) != MaxQueuedNotes {
		t.Fatalf("Complete returned %d notes, want all %d", len(got), MaxQueuedNotes)
	}
	tk, _ := r.Find(x.ID)
	size := 0
	for _, n := range tk.Undelivered[:len(tk.Undelivered)-1] {
		size += len(n)
	}
	kept := UndeliveredKeptMax / MaxCtl
	last := tk.Undelivered[len(tk.Undelivered)-1]
	if size > UndeliveredKeptMax || len(tk.Undelivered) != kept+1 || !strings.HasPrefix(last, "[252 more undelivered notes (") {
		t.Fatalf("kept %d notes of %d bytes, last %q", len(tk.Undelivered), size, last)
	}
}

// A reader of a pruned task's control files (a fresh lookup, or a handle
// resolved before the prune) gets ENOENT, never a panic or stale data, and
// the task's log file is gone.
func TestFilesOfAPrunedTaskAreENOENT(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.KeepFinished = 1 })
	human := as("default")
	a := mustClone(t, rn, human, "echo from-a")
	waitDone(t, rn, a)
	if got := mustRead(t, rn, human, a+"/wait"); got != "done\nfrom-a\n" {
		t.Fatalf("wait of a: %q", got)
	}
	files := []string{"status", "prompt", "result", "error", "activity", "output", "log", "question", "approval", "ask", "wait"}
	held := map[string]*ctltree.File{}
	for _, f := range files {
		held[f] = ctlFile(t, rn, human, a+"/"+f)
	}
	ctl, result, activity := ctlFile(t, rn, human, a+"/ctl"), ctlFile(t, rn, asTask(a), a+"/result"), ctlFile(t, rn, asTask(a), a+"/activity")
	if _, err := os.Stat(rn.LogPath(a)); err != nil {
		t.Fatalf("a's log before the prune: %v", err)
	}

	b := mustClone(t, rn, human, "true")
	waitDone(t, rn, b)
	// The prune runs right after b's Complete, in b's reaper: wait for it.
	deadline := time.After(failsafe)
	for {
		ch := rn.Registry().Changed()
		if _, ok := rn.Registry().Find(a); !ok {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("task %s was never pruned: %v", a, ids(rn.Registry().List()))
		}
	}
	if _, ok := rn.Registry().Find(b); !ok {
		t.Fatal("the task that finished last was pruned")
	}
	waitGone(t, rn.LogPath(a))
	if resolve(rn, human, a) != nil || resolve(rn, human, a+"/status") != nil {
		t.Fatal("a pruned task still resolves")
	}
	if tree := mustRead(t, rn, human, "tree"); strings.Contains(tree, "echo from-a") {
		t.Fatalf("the tree still lists a:\n%s", tree)
	}
	for _, f := range files {
		_, err := held[f].Read(context.Background(), human)
		if ctltree.ErrnoOf(err) != syscall.ENOENT {
			t.Errorf("%s of a pruned task: %v, want ENOENT", f, err)
		}
	}
	wantErrno(t, ctl.Write(human, []byte("stop")), syscall.ENOENT, "no task")
	wantErrno(t, result.Write(asTask(a), []byte("late")), syscall.ENOENT, "no task")
	wantErrno(t, activity.Append(asTask(a), []byte("started x")), syscall.ENOENT, "no task")
}

// Logs that earlier runs left in the log directory are bounded by
// KeepFinished too, newest kept; other files there are left alone.
func TestNewBoundsOldRunsLogs(t *testing.T) {
	dir := t.TempDir()
	names := []string{
		"20240101T000000-1.log", "20240101T000000-2.log", "20240101T000000-10.log",
		"20240102T000000-1.log", "20240103T000000-7.log",
	}
	for _, n := range append(names, "notes.txt", "20240101T000000-x.log") {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newRunner(t, func(c *Config) { c.LogDir, c.KeepFinished = dir, 3 })
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := []string{"20240101T000000-10.log", "20240101T000000-x.log", "20240102T000000-1.log", "20240103T000000-7.log", "notes.txt"}
	if !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
}

func TestKeepFinishedValidated(t *testing.T) {
	for _, n := range []int{-1, MaxKeepFinished + 1} {
		if _, err := New(Config{Mount: t.TempDir(), KeepFinished: n}); err == nil || !strings.Contains(err.Error(), "keep_finished") {
			t.Errorf("keep_finished %d: %v", n, err)
		}
	}
	if _, err := ParseConfig([]byte(`{"keep_finished": -5}`)); err == nil || !strings.Contains(err.Error(), "keep_finished") {
		t.Errorf("agents.json keep_finished -5: %v", err)
	}
	if c := (Config{}).WithDefaults(); c.KeepFinished != DefaultKeepFinished {
		t.Errorf("default %d", c.KeepFinished)
	}
}

// waitGone waits until path does not exist: a pruned task's log goes
// right after its entry, outside the registry mutex, in the goroutine that
// pruned. Polled with a deadline (a hang guard, not a timing assertion).
func waitGone(t *testing.T, path string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(failsafe)
	for {
		_, err := os.Stat(path)
		if os.IsNotExist(err) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s was never removed: %v", path, err)
		}
	}
}
