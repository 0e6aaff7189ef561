package invalidate

import (
	"log/slog"
	"slices"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
	"github.com/rubinofs/rubinofs/watcher"
)

// fakeTree is a Tree of fakeNodes whose backing stats the test sets
// (missing: lstat fails with ENOENT); every notification is logged.
type fakeTree struct {
	root    *fakeNode
	stats   map[string]*syscall.Stat_t
	log     []string
	bridged chan struct{}
}

type fakeNode struct {
	t        *fakeTree
	name     string
	ino      uint64
	dir      bool
	children map[string]*fakeNode
}

func (t *fakeTree) Bridged() <-chan struct{} { return t.bridged }
func (t *fakeTree) Root() Node               { return t.root }
func (t *fakeTree) ControlDir() string       { return ".rubino" }
func (t *fakeTree) Ino(st *syscall.Stat_t) uint64 {
	return st.Ino
}
func (t *fakeTree) Lstat(rel string) (*syscall.Stat_t, error) {
	if st, ok := t.stats[rel]; ok {
		return st, nil
	}
	return nil, syscall.ENOENT
}

func (n *fakeNode) Child(name string) Node {
	if c, ok := n.children[name]; ok {
		return c
	}
	return nil
}
func (n *fakeNode) Children() map[string]Node {
	out := map[string]Node{}
	for k, v := range n.children {
		out[k] = v
	}
	return out
}
func (n *fakeNode) IsDir() bool { return n.dir }
func (n *fakeNode) Ino() uint64 { return n.ino }
func (n *fakeNode) ID() (guard.FileID, bool) {
	return guard.FileID{Dev: 1, Ino: n.ino}, n.name != ".rubino"
}
func (n *fakeNode) NotifyContent()          { n.t.log = append(n.t.log, "content "+n.name) }
func (n *fakeNode) NotifyEntry(name string) { n.t.log = append(n.t.log, "entry "+n.name+"/"+name) }
func (n *fakeNode) RmChild(name string) {
	delete(n.children, name)
	n.t.log = append(n.t.log, "rm "+n.name+"/"+name)
}

// newTree builds root/{d/{f}, .rubino} with backing stats for d and d/f.
func newTree() *fakeTree {
	t := &fakeTree{bridged: make(chan struct{})}
	t.root = &fakeNode{t: t, name: "", ino: 1, dir: true, children: map[string]*fakeNode{}}
	d := &fakeNode{t: t, name: "d", ino: 2, dir: true, children: map[string]*fakeNode{}}
	d.children["f"] = &fakeNode{t: t, name: "f", ino: 3}
	t.root.children["d"] = d
	t.root.children[".rubino"] = &fakeNode{t: t, name: ".rubino", ino: 1<<62 | 9, dir: true}
	t.stats = map[string]*syscall.Stat_t{
		"d":   {Ino: 2, Dev: 1, Mode: syscall.S_IFDIR},
		"d/f": {Ino: 3, Dev: 1, Mode: syscall.S_IFREG},
	}
	return t
}

func newInv(t *fakeTree) *Invalidation {
	return &Invalidation{tree: t, o: Options{Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)}}
}

// TestApply: a write drops the file's content and its dentry and the
// parent's attributes, and is an external mutation to the guard; a chmod
// alone is none; a changed directory still at its name keeps its dentry
// (docs/DESIGN.md#poll-keeps-cwd); a removed name leaves the tree.
func TestApply(t *testing.T) {
	tr := newTree()
	inv := newInv(tr)
	id := guard.FileID{Dev: 1, Ino: 3}
	inv.apply(watcher.Event{Path: "d/f", Op: watcher.Chmod})
	if m := inv.o.Guard.LastMutation(id); m.Session != "" {
		t.Fatalf("chmod noted as a mutation by %q", m.Session)
	}
	tr.log = nil
	inv.apply(watcher.Event{Path: "d/f", Op: watcher.Write})
	if want := []string{"content f", "entry d/f", "content d"}; !slices.Equal(tr.log, want) {
		t.Fatalf("write: %q, want %q", tr.log, want)
	}
	if m := inv.o.Guard.LastMutation(id); m.Session != sessions.External {
		t.Fatalf("write noted by %q, want external", m.Session)
	}
	tr.log = nil
	inv.apply(watcher.Event{Path: "d", Op: watcher.Write})
	if want := []string{"content d", "content "}; !slices.Equal(tr.log, want) {
		t.Fatalf("directory still there: %q, want %q", tr.log, want)
	}
	tr.log = nil
	delete(tr.stats, "d/f")
	inv.apply(watcher.Event{Path: "d/f", Op: watcher.Remove})
	if want := []string{"content f", "rm d/f", "entry d/f", "content d"}; !slices.Equal(tr.log, want) {
		t.Fatalf("remove: %q, want %q", tr.log, want)
	}
}

// TestInvalidateAll: a full invalidation drops every known entry but the
// root's control directory, deepest first.
func TestInvalidateAll(t *testing.T) {
	tr := newTree()
	newInv(tr).invalidateAll()
	if want := []string{"content f", "entry d/f", "content d", "entry /d", "content "}; !slices.Equal(tr.log, want) {
		t.Fatalf("%q, want %q", tr.log, want)
	}
}

// TestApplyNameLeadsElsewhere: a known directory whose name leads to
// another directory by now (an external `mv d d.old; mv e d`, or an
// exchange) leaves the tree, whatever the event's op: a process still in
// it must not reach the other directory by the old node's path
// (docs/DESIGN.md#moved-out-of-tree). A file replaced at its name leaves
// it too; one still at its name stays.
func TestApplyNameLeadsElsewhere(t *testing.T) {
	for _, op := range []watcher.Op{watcher.Create, watcher.Rename, watcher.Write} {
		tr := newTree()
		tr.stats["d"] = &syscall.Stat_t{Ino: 7, Dev: 1, Mode: syscall.S_IFDIR}
		newInv(tr).apply(watcher.Event{Path: "d", Op: op})
		if want := []string{"content d", "rm /d", "entry /d", "content "}; !slices.Equal(tr.log, want) {
			t.Fatalf("op %v: %q, want %q", op, tr.log, want)
		}
		if tr.root.Child("d") != nil {
			t.Fatalf("op %v: d still in the tree", op)
		}
	}
	tr := newTree()
	tr.stats["d/f"] = &syscall.Stat_t{Ino: 8, Dev: 1, Mode: syscall.S_IFREG}
	newInv(tr).apply(watcher.Event{Path: "d/f", Op: watcher.Create})
	if want := []string{"content f", "rm d/f", "entry d/f", "content d"}; !slices.Equal(tr.log, want) {
		t.Fatalf("replaced file: %q, want %q", tr.log, want)
	}
}
