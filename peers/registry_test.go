package peers

import (
	"os"
	"path/filepath"
	"testing"
)

// tree makes a/b/c under a temporary directory and a registry directory
// beside it, and returns both.
func tree(t *testing.T) (base, reg string) {
	t.Helper()
	base = t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "a", "b", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	return base, filepath.Join(base, "reg")
}

func register(t *testing.T, reg, root string) *Registry {
	t.Helper()
	r, err := Register(reg, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestAloneNoPeer: a registration's own locks never make it its own peer,
// nor do registrations of unrelated directories (siblings, which share
// only ancestors).
func TestAloneNoPeer(t *testing.T) {
	base, reg := tree(t)
	r := register(t, reg, filepath.Join(base, "a", "b"))
	if r.Peer() {
		t.Fatal("a lone registration sees a peer: its own locks")
	}
	x := register(t, reg, filepath.Join(base, "x"))
	if r.Peer() || x.Peer() {
		t.Fatalf("siblings are peers: %v %v", r.Peer(), x.Peer())
	}
}

// TestSameRoot: two registrations of one directory (two descriptors of
// each key file in one process, as two daemons would hold them) see each
// other, also through a symlink to it; once one closes, the other is
// alone again.
func TestSameRoot(t *testing.T) {
	base, reg := tree(t)
	root := filepath.Join(base, "a", "b")
	if err := os.Symlink(root, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	r1 := register(t, reg, root)
	r2, err := Register(reg, filepath.Join(base, "link"))
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Peer() || !r2.Peer() {
		t.Fatalf("same root: peers %v %v, want both", r1.Peer(), r2.Peer())
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if r1.Peer() {
		t.Fatal("a closed registration is still seen")
	}
}

// TestNested: a registration of a directory inside another's root and the
// other see each other, at any depth; one of a sibling of the inner root
// sees neither as a peer of itself unless above or below it.
func TestNested(t *testing.T) {
	base, reg := tree(t)
	outer := register(t, reg, filepath.Join(base, "a"))
	inner := register(t, reg, filepath.Join(base, "a", "b", "c"))
	if !outer.Peer() {
		t.Fatal("the outer registration does not see the one beneath it")
	}
	if !inner.Peer() {
		t.Fatal("the inner registration does not see the one above it")
	}
	x := register(t, reg, filepath.Join(base, "x"))
	if x.Peer() {
		t.Fatal("an unrelated registration sees a peer")
	}
}

// TestCloseIdempotent: Close on nil, twice, and Peer after Close.
func TestCloseIdempotent(t *testing.T) {
	var nilReg *Registry
	if nilReg.Close() != nil || nilReg.Peer() {
		t.Fatal("nil registry")
	}
	base, reg := tree(t)
	r, err := Register(reg, base)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if r.Close() != nil || r.Peer() {
		t.Fatal("closed registry")
	}
}

// BenchmarkPeerAlone measures one Peer query of a lone registration (the
// cost an unshared mount pays per decision): the host key only.
func BenchmarkPeerAlone(b *testing.B) { benchPeer(b, false) }

// BenchmarkPeerOthers is BenchmarkPeerAlone with an unrelated
// registration on the host: every key file is queried.
func BenchmarkPeerOthers(b *testing.B) { benchPeer(b, true) }

// benchPeer registers a/b/c under a temporary directory, and x beside it
// when other, and measures Peer queries of the first.
func benchPeer(b *testing.B, other bool) {
	base := b.TempDir()
	reg := filepath.Join(base, "reg")
	roots := []string{filepath.Join(base, "a", "b", "c"), filepath.Join(base, "x")}
	if !other {
		roots = roots[:1]
	}
	var rs []*Registry
	for _, root := range roots {
		if err := os.MkdirAll(root, 0o755); err != nil {
			b.Fatal(err)
		}
		r, err := Register(reg, root)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		rs = append(rs, r)
	}
	b.ReportMetric(float64(2+len(rs[0].ancestors)), "keys")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if rs[0].Peer() {
			b.Fatal("peer")
		}
	}
}

// TestCloseRemovesUnheldKeys: a registration that ends removes the key
// files no other registration holds, keeps those another one holds, and a
// later registration of the same root is seen as before.
func TestCloseRemovesUnheldKeys(t *testing.T) {
	base, reg := tree(t)
	keys := func() int {
		ents, err := os.ReadDir(reg)
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	inner, err := Register(reg, filepath.Join(base, "a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	lone := keys()
	x := register(t, reg, filepath.Join(base, "x")) // shares base's ancestors' keys
	withX := keys()
	if withX != lone+1 {
		t.Fatalf("%d key files with a sibling registration, want %d", withX, lone+1)
	}
	if err := inner.Close(); err != nil {
		t.Fatal(err)
	}
	// a/b/c, a/b, a are gone; x, base, its ancestors and host stay.
	if got := keys(); got != withX-3 {
		t.Fatalf("%d key files after the inner registration closed, want %d", got, withX-3)
	}
	r1 := register(t, reg, filepath.Join(base, "a", "b", "c"))
	r2 := register(t, reg, filepath.Join(base, "a", "b", "c"))
	if !r1.Peer() || !r2.Peer() || x.Peer() {
		t.Fatalf("after re-registering: peers %v %v, sibling %v", r1.Peer(), r2.Peer(), x.Peer())
	}
}

// TestRegistryDirMustBePrivate: a registry directory that another user
// could write (group- or world-writable), or that is a symlink, is
// refused: its key files could be planted or swapped.
func TestRegistryDirMustBePrivate(t *testing.T) {
	base, reg := tree(t)
	if err := os.Mkdir(reg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(reg, 0o777); err != nil {
		t.Fatal(err)
	}
	if r, err := Register(reg, base); err == nil {
		r.Close()
		t.Fatal("a world-writable registry directory was used")
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(base, "x"), link); err != nil {
		t.Fatal(err)
	}
	if r, err := Register(link, base); err == nil {
		r.Close()
		t.Fatal("a symlinked registry directory was used")
	}
}
