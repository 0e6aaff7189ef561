package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPreImageOwner: a captured pre-image keeps the name's owner and
// group; an absent one has none.
func TestPreImageOwner(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	d.seed(map[string]string{"f": "x"})
	if os.Geteuid() == 0 {
		if err := os.Lchown(filepath.Join(d.root, "f"), 1234, 2345); err != nil {
			t.Fatal(err)
		}
	}
	st := mustStat(t, filepath.Join(d.root, "f"))
	fd, err := os.Open(d.root)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	pre, err := CaptureAt(j.Blobs(), int(fd.Fd()), "f")
	if err != nil {
		t.Fatal(err)
	}
	if pre.Uid == nil || pre.Gid == nil || *pre.Uid != st.uid || *pre.Gid != st.gid {
		t.Fatalf("pre-image owner %v:%v, want %d:%d", pre.Uid, pre.Gid, st.uid, st.gid)
	}
	abs, err := CaptureAt(j.Blobs(), int(fd.Fd()), "missing")
	if err != nil || abs.Uid != nil || abs.Gid != nil {
		t.Fatalf("absent pre-image %+v %v", abs, err)
	}
}

type ownerOf struct{ uid, gid uint32 }

func mustStat(t *testing.T, p string) ownerOf {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return ownerOf{st.Uid, st.Gid}
}

// gateNo withholds every side but the current state of keep.
type gateNo struct {
	DirInspector
	keep string
}

func (g gateNo) MayShow(path string, pre *PreImage) bool { return pre == nil && path == g.keep }

// TestDiffContentGate: a side the gate refuses shows as binary, its bytes
// nowhere in the diff.
func TestDiffContentGate(t *testing.T) {
	j := openJ(t, filepath.Join(t.TempDir(), "journal"))
	d := newDriver(t, j, "agent")
	d.seed(map[string]string{"a": "OLD-A\n", "b": "OLD-B\n"})
	d.write("a", "NEW-A\n")
	d.write("b", "NEW-B\n")
	ins := d.ins()
	out, err := j.Diff("agent", "", nil, gateNo{ins, "b"}, ins.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"OLD-A", "NEW-A", "OLD-B"} {
		if strings.Contains(out, secret) {
			t.Errorf("the diff shows withheld %s:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "Binary files a/a and b/a differ") || !strings.Contains(out, "Binary files a/b and b/b differ") {
		t.Errorf("withheld sides not shown as binary:\n%s", out)
	}
}
