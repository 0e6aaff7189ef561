package fusefs

import (
	"slices"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/ctltree"
)

// readRoot lists the root through one directory handle, READDIR or
// READDIRPLUS, in pages of size bytes, each request continuing at the
// previous page's last offset as the kernel does. It returns the names
// and fails on a repeated offset.
func readRoot(t *testing.T, raw fuse.RawFileSystem, plus bool, size uint32) []string {
	t.Helper()
	cancel := make(chan struct{})
	var od fuse.OpenOut
	if st := raw.OpenDir(cancel, &fuse.OpenIn{InHeader: hdr(1)}, &od); !st.Ok() {
		t.Fatalf("opendir /: %v", st)
	}
	defer raw.ReleaseDir(&fuse.ReleaseIn{InHeader: hdr(1), Fh: od.Fh})
	var names []string
	seen := map[uint64]bool{}
	off := uint64(0)
	for {
		buf := make([]byte, size)
		out := fuse.NewDirEntryList(buf, off)
		in := &fuse.ReadIn{InHeader: hdr(1), Fh: od.Fh, Offset: off, Size: size}
		var ents []fuse.DirEntry
		var err error
		if plus {
			if st := raw.ReadDirPlus(cancel, in, out); !st.Ok() {
				t.Fatalf("readdirplus / at %d: %v", off, st)
			}
			ents, _, err = fuse.ParseDirLookupEntries(out.Bytes())
		} else {
			if st := raw.ReadDir(cancel, in, out); !st.Ok() {
				t.Fatalf("readdir / at %d: %v", off, st)
			}
			ents, err = fuse.ParseDirEntries(out.Bytes())
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) == 0 {
			return names
		}
		for _, e := range ents {
			if seen[e.Off] {
				t.Fatalf("offset %d served twice (%s)", e.Off, e.Name)
			}
			seen[e.Off] = true
			names = append(names, e.Name)
			off = e.Off
		}
	}
}

// TestRawRootListingHidesControlTree drives READDIR and READDIRPLUS of the
// root, whole and in small pages: .rubino is never listed (nor the real
// .rubino it shadows), the other entries all are, once, at consistent
// offsets; .rubino stays reachable by LOOKUP; the root's link count
// matches the listed subdirectories (the shadowed real .rubino directory
// is not counted).
func TestRawRootListingHidesControlTree(t *testing.T) {
	raw, _ := rawFS(t, map[string]string{
		"a.txt": "a\n", "b.txt": "b\n", "dir/f": "f\n", "other/g": "g\n",
		ctltree.DirName + "/real.txt": "shadowed\n",
	})
	want := []string{".", "..", "a.txt", "b.txt", "dir", "other"}
	for _, plus := range []bool{false, true} {
		small := uint32(48) // one short-named entry per request
		if plus {
			small += 128 // and its EntryOut
		}
		for _, size := range []uint32{4096, small} {
			got := readRoot(t, raw, plus, size)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("plus=%v size=%d: root lists %q, want %q", plus, size, got, want)
			}
		}
	}
	cancel := make(chan struct{})
	var ctl, status fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, ctltree.DirName, &ctl); !st.Ok() {
		t.Fatalf("lookup .rubino: %v", st)
	}
	if ctl.Attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Fatalf(".rubino mode %o", ctl.Attr.Mode)
	}
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: ctl.NodeId}, "status", &status); !st.Ok() {
		t.Fatalf("lookup .rubino/status: %v", st)
	}
	var real fuse.EntryOut
	if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: ctl.NodeId}, "real.txt", &real); st != fuse.ENOENT {
		t.Fatalf("the shadowed real .rubino/real.txt: %v, want ENOENT", st)
	}
	var ao fuse.AttrOut
	if st := raw.GetAttr(cancel, &fuse.GetAttrIn{InHeader: hdr(1)}, &ao); !st.Ok() {
		t.Fatalf("getattr /: %v", st)
	}
	if ao.Attr.Nlink != 4 { // ".", its entry in the parent, dir/.., other/..
		t.Errorf("root nlink %d, want 4 (2 + the 2 listed subdirectories)", ao.Attr.Nlink)
	}
}
