package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rubinofs/rubinofs/guard"
)

// lookupNode looks rel's elements up one by one from f's root, as the
// kernel would through a mount (go-fuse's bridge over f, not mounted),
// and returns the node of the last; lookupNodes does it for each of
// rels over one bridge.
func lookupNode(t testing.TB, f *FS, rel string) *Node { return lookupNodes(t, f, rel)[0] }

func lookupNodes(t testing.TB, f *FS, rels ...string) []*Node {
	t.Helper()
	sec := time.Second
	raw := fs.NewNodeFS(f.Root(), &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec})
	raw.Init(nil)
	cancel := make(chan struct{})
	var nodes []*Node
	for _, rel := range rels {
		id := uint64(1)
		in := f.root.EmbeddedInode()
		for _, name := range strings.Split(rel, "/") {
			var out fuse.EntryOut
			if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: id}, name, &out); !st.Ok() {
				t.Fatalf("lookup %s: %v", name, st)
			}
			id, in = out.NodeId, in.GetChild(name)
		}
		nodes = append(nodes, in.Operations().(*Node))
	}
	return nodes
}

// TestStaleDirPathNeverReachesAnother: the node of directory a is asked
// for a lookup, mkdir, create, symlink, unlink, rmdir, rename, listing and
// O_TMPFILE, and a's files for an open, their attributes, a readlink and
// their extended attributes, after a and c traded names in the backing directory, which
// the inode tree has not been told: every request fails with ESTALE, and
// the directory now at a (c's) is untouched. Before, each went by the
// tree's path "a" into c's directory (docs/DESIGN.md#dir-identity).
func TestStaleDirPathNeverReachesAnother(t *testing.T) {
	for _, journaled := range []bool{false, true} {
		files := map[string]string{"a/in_a": "a", "a/x.log": "a", "c/in_c": "c", "c/sub/keep": "k", "c/in_a": "c's", "c/x.log": "c's", ".gitignore": "*.log\n"}
		var f *FS
		var ws string
		if journaled {
			f, _, ws = journalFS(t, guard.ModeEnforce, files)
		} else {
			f, ws = plainFS(t, files, guard.ModeEnforce)
		}
		for dir, target := range map[string]string{"a": "a's target", "c": "c's target"} {
			if err := os.Symlink(target, filepath.Join(ws, dir, "l")); err != nil {
				t.Fatal(err)
			}
		}
		nodes := lookupNodes(t, f, "a", "a/in_a", "a/x.log", "a/l")
		a, inA, xLog, l := nodes[0], nodes[1], nodes[2], nodes[3]
		if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "a"), unix.AT_FDCWD, filepath.Join(ws, "c"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var out fuse.EntryOut
		check := func(what string, errno syscall.Errno) {
			t.Helper()
			if errno != syscall.ESTALE {
				t.Errorf("journal %v, %s through a's node after the swap: %v, want ESTALE", journaled, what, errno)
			}
		}
		_, errno := a.Lookup(ctx, "in_c", &out)
		check("lookup of in_c", errno)
		_, errno = a.Mkdir(ctx, "m", 0o755, &out)
		check("mkdir", errno)
		_, _, _, errno = a.Create(ctx, "new", syscall.O_WRONLY, 0o644, &out)
		check("create", errno)
		_, errno = a.Symlink(ctx, "t", "l", &out)
		check("symlink", errno)
		check("unlink of in_c", a.Unlink(ctx, "in_c"))
		check("rmdir of sub", a.Rmdir(ctx, "sub"))
		check("rename of in_c", a.Rename(ctx, "in_c", a, "moved", 0))
		_, _, errno = a.OpendirHandle(ctx, 0)
		check("opendir", errno)
		_, _, _, errno = a.Tmpfile(ctx, syscall.O_RDWR, 0o644, &out)
		check("O_TMPFILE", errno)
		// a's own files by their nodes: the path a/in_a leads to c's file
		// of that name now; x.log is exempt (git-ignored), opened
		// untracked.
		for _, fn := range []*Node{inA, xLog} {
			for _, flags := range []uint32{syscall.O_RDONLY, syscall.O_WRONLY | syscall.O_TRUNC} {
				_, _, errno := fn.Open(ctx, flags)
				check(fmt.Sprintf("open(%#o) of %s", flags, fn.rel()), errno)
			}
		}
		// A link of a's file by its node into a's own directory (now c):
		// refused first for the source, which leads to c's in_a now.
		_, errno = inA.fs.root.Link(ctx, inA, "linked", &out)
		if errno != syscall.ESTALE {
			t.Errorf("journal %v, link of a/in_a after the swap: %v, want ESTALE", journaled, errno)
		}
		if _, err := os.Lstat(filepath.Join(ws, "linked")); err == nil {
			t.Errorf("journal %v: the link of a/in_a linked another file", journaled)
		}
		// Its attributes, by node without a handle.
		var ao fuse.AttrOut
		check("getattr of a/in_a", inA.Getattr(ctx, nil, &ao))
		var so fuse.StatxOut
		check("statx of a/in_a", inA.Statx(ctx, nil, 0, unix.STATX_BASIC_STATS, &so))
		check("setxattr of a/in_a", inA.Setxattr(ctx, "user.t", []byte("v"), 0))
		check("removexattr of a/in_a", inA.Removexattr(ctx, "user.t"))
		// Reads by node without a handle: the symlink's target and the
		// extended attributes of the file now at a's old paths are c's.
		target, errno := l.Readlink(ctx)
		if errno != syscall.ESTALE {
			t.Errorf("journal %v, readlink of a/l after the swap: %q, %v, want ESTALE", journaled, target, errno)
		}
		_, errno = inA.Getxattr(ctx, "user.t", make([]byte, 64))
		check("getxattr of a/in_a", errno)
		_, errno = inA.Listxattr(ctx, make([]byte, 256))
		check("listxattr of a/in_a", errno)
		for _, name := range []string{"in_a", "x.log"} {
			if b, err := os.ReadFile(filepath.Join(ws, "a", name)); err != nil || string(b) != "c's" {
				t.Errorf("journal %v: the other directory's %s: %q, %v", journaled, name, b, err)
			}
		}
		names, err := os.ReadDir(filepath.Join(ws, "a"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range names {
			got = append(got, e.Name())
		}
		if strings.Join(got, " ") != "in_a in_c l sub x.log" {
			t.Errorf("journal %v: the directory now at a holds %q, want in_a, in_c, l, sub and x.log only", journaled, got)
		}
		if _, err := os.Lstat(filepath.Join(ws, "c/sub")); err == nil {
			t.Errorf("journal %v: sub appeared in a's own directory", journaled)
		}
	}
}
