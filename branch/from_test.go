package branch

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/rubinofs/rubinofs/journal"
)

// putBlob stores content in the blob store at dir as the journal does
// (dir/A[:2]/A[2:], A its xxh3-128 in hex) and returns its address.
func putBlob(t *testing.T, dir, content string) string {
	t.Helper()
	sum := xxh3.Hash128([]byte(content)).Bytes()
	addr := hex.EncodeToString(sum[:])
	must(t, os.MkdirAll(filepath.Join(dir, addr[:2]), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, addr[:2], addr[2:]), []byte(content), 0o600))
	return addr
}

// TestCreateFromPlan (root only): a plan's steps replayed into the base
// layer give the branch point: a file's bytes, mode and owner restored,
// a created file removed, directories renamed and exchanged back (copied:
// the building overlay has no redirects) with what is below them, a
// directory made where a file is now; the workspace is untouched, the
// branch's diff is empty and Lowers names both layers. Unrecoverable
// pre-images are refused naming the path, leaving nothing.
func TestCreateFromPlan(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting an overlay needs root")
	}
	tmp := t.TempDir()
	ws, blobs, state := filepath.Join(tmp, "ws"), filepath.Join(tmp, "blobs"), filepath.Join(tmp, "state")
	tree(t, ws, map[string]string{"f.txt": "now\n", "new.txt": "created since\n", "renamed/x": "x\n",
		"renamed/sub/y": "y\n", "p/in-p": "p\n", "q/in-q": "q\n", "wasdir": "a file now\n", "keep": "keep\n"})
	before := treeListing(t, ws)
	uid, gid := uint32(65534), uint32(65534)
	plan := journal.Plan{Session: "s", To: "cp000001", Steps: []journal.Step{
		{Kind: journal.StepRestore, Path: "f.txt", Pre: journal.PreImage{Kind: journal.KindFile, Mode: 0o100600, Size: 5, Blob: putBlob(t, blobs, "then\n"), Uid: &uid, Gid: &gid}},
		{Kind: journal.StepRemove, Path: "new.txt", Pre: journal.PreImage{Kind: journal.KindAbsent}},
		{Kind: journal.StepRename, Path: "orig", From: "renamed"},
		{Kind: journal.StepExchange, Path: "p", From: "q"},
		{Kind: journal.StepRestore, Path: "wasdir", Pre: journal.PreImage{Kind: journal.KindDir, Mode: 0o40750}},
		{Kind: journal.StepRestore, Path: "wasdir/inner", Pre: journal.PreImage{Kind: journal.KindSymlink, Target: "../keep"}},
	}}
	m := Meta{Name: "b", Created: time.Now().UTC(), Workspace: ws, Mount: ws, From: "cp000001", Session: "s"}
	b, err := CreateFrom(state, m, ws, From{Plan: plan, Blobs: journal.BlobsAt(blobs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Remove() })
	want := map[string]string{"f.txt": "then\n", "orig/x": "x\n", "orig/sub/y": "y\n", "p/in-q": "q\n", "q/in-p": "p\n", "keep": "keep\n"}
	for rel, body := range want {
		if got, err := os.ReadFile(filepath.Join(b.Merged(), rel)); err != nil || string(got) != body {
			t.Errorf("the branch's %s = %q, %v; want %q", rel, got, err, body)
		}
	}
	for _, rel := range []string{"new.txt", "renamed", "p/in-p", "base.tmp"} {
		if _, err := os.Lstat(filepath.Join(b.Merged(), rel)); err == nil {
			t.Errorf("the branch has %s, absent at the checkpoint", rel)
		}
	}
	if fi, err := os.Stat(filepath.Join(b.Merged(), "f.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("f.txt's mode: %v %v", fi, err)
	} else if st := statOwner(fi); st != [2]uint32{uid, gid} {
		t.Errorf("f.txt's owner = %v, want 65534:65534", st)
	}
	if l, err := os.Readlink(filepath.Join(b.Merged(), "wasdir/inner")); err != nil || l != "../keep" {
		t.Errorf("wasdir/inner: %q %v", l, err)
	}
	if after := treeListing(t, ws); after != before {
		t.Errorf("the workspace changed:\n%s\nwas:\n%s", after, before)
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "base.tmp")); err == nil {
		t.Error("base.tmp left behind")
	}
	if l := b.Lowers(); len(l) != 2 || l[0] != b.BaseLayer() || l[1] != ws {
		t.Errorf("Lowers = %v", l)
	}
	if cs, err := Changes(b.Upper(), b.Lowers()...); err != nil || len(cs) != 0 {
		t.Errorf("the branch's changes right after CreateFrom: %s %v", listing(cs), err)
	}

	plan.Unrecoverable = []journal.PreImage{{Path: "big.bin", Kind: journal.KindFile, Unrecoverable: journal.UnrecoverableTooLarge}}
	m.Name = "c"
	if _, err := CreateFrom(state, m, ws, From{Plan: plan, Blobs: journal.BlobsAt(blobs)}); !errors.Is(err, ErrUnrecoverable) || !strings.Contains(err.Error(), "big.bin") {
		t.Errorf("an unrecoverable pre-image: %v", err)
	}
	plan.Unrecoverable = nil
	plan.Steps = append(plan.Steps, journal.Step{Kind: journal.StepRestore, Path: "gone.txt", Pre: journal.PreImage{Kind: journal.KindFile, Mode: 0o100644, Size: 3, Blob: strings.Repeat("0", 32)}})
	if _, err := CreateFrom(state, m, ws, From{Plan: plan, Blobs: journal.BlobsAt(blobs)}); err == nil || !strings.Contains(err.Error(), "gone.txt") {
		t.Errorf("a missing blob: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, DirName, "c")); err == nil {
		t.Error("a failed CreateFrom left its directory")
	}
}

// treeListing lists root: each path, its mode, and a file's bytes.
func treeListing(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	must(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b.WriteString(rel + " " + fi.Mode().String())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			b.WriteString(" " + string(c))
		}
		b.WriteString("\n")
		return nil
	}))
	return b.String()
}

// statOwner is fi's owner and group.
func statOwner(fi os.FileInfo) [2]uint32 {
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint32{st.Uid, st.Gid}
}

// TestCopyTreeNoFollowSwappedDir: a directory of the live workspace
// swapped for a symlink to a directory only root should read, after its
// parent was listed and before it is copied, is copied as that symlink;
// nothing of the directory it points to is copied (the walk by path
// followed it).
func TestCopyTreeNoFollowSwappedDir(t *testing.T) {
	tmp := t.TempDir()
	src, dst, secret := filepath.Join(tmp, "src"), filepath.Join(tmp, "dst"), filepath.Join(tmp, "secret")
	for _, d := range []string{filepath.Join(src, "d"), secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(src, "d", "mine"), []byte("mine\n"), 0o644)
	os.WriteFile(filepath.Join(secret, "shadow"), []byte("root only\n"), 0o600)
	copyTreeListed = func(dir string) {
		if dir == src {
			os.Rename(filepath.Join(src, "d"), filepath.Join(tmp, "d-away"))
			os.Symlink(secret, filepath.Join(src, "d"))
		}
	}
	defer func() { copyTreeListed = nil }()
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "d")); err != nil || target != secret {
		t.Fatalf("dst/d: %q %v, want the symlink to %s", target, err, secret)
	}
	if ents, _ := os.ReadDir(secret); len(ents) != 1 {
		t.Fatalf("the copy wrote into the directory the symlink names: %v", ents)
	}
}
