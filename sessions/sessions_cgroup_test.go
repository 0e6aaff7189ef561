package sessions

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

func TestCgroupPathAndNames(t *testing.T) {
	for _, c := range []struct{ in, mnt, want string }{
		{"/a/b", "/sys/fs/cgroup", "/a/b"},
		{"/sys/fs/cgroup/a/b/", "/sys/fs/cgroup", "/a/b"},
		{"/sys/fs/cgroup", "/sys/fs/cgroup", "/"},
		{"/sys/fs/cgroupx/a", "/sys/fs/cgroup", "/sys/fs/cgroupx/a"},
		{"//a//b", "", "/a/b"},
	} {
		if got, err := CgroupPath(c.in, c.mnt); err != nil || got != c.want {
			t.Errorf("CgroupPath(%q, %q) = %q, %v; want %q", c.in, c.mnt, got, err, c.want)
		}
	}
	for _, bad := range []string{"a/b", "", "/a/../b"} {
		if _, err := CgroupPath(bad, "/sys/fs/cgroup"); err == nil {
			t.Errorf("CgroupPath(%q) accepted", bad)
		}
	}
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for in, want := range map[string]string{
		"/system.slice/docker-" + id + ".scope":                    id,
		"/machine.slice/libpod-" + id + ".scope":                   id,
		"/docker/" + id:                                            id,
		"/kubepods/burstable/pod1/cri-containerd-" + id + ".scope": id,
		"/a/agent one":                                             "agent_one",
		"/a/run-x.scope":                                           "run-x",
	} {
		if got := autoSessionName(in); got != want {
			t.Errorf("autoSessionName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := parseProcCgroup([]byte("9:name=systemd:/\n0::/a/b (deleted)\n")); got != "/a/b" {
		t.Errorf("parseProcCgroup: %q", got)
	}
}

// TestCgroupSessionEndsOnRemoval needs a writable cgroup v2 hierarchy
// (root): the session of a cgroup ends when the cgroup is removed.
func TestCgroupSessionEndsOnRemoval(t *testing.T) {
	mnt, err := procfs.Cgroup2Mount()
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and a cgroup v2 hierarchy")
	}
	cg := fmt.Sprintf("/rubino-unit-%d", os.Getpid())
	dir := filepath.Join(mnt, cg)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	s := NewRegistry()
	ended := make(chan string, 1)
	s.OnEnd = func(n string) { ended <- n }
	if err := s.RegisterCgroup("c1", dir, "", false); err != nil {
		t.Fatal(err)
	}
	if si, ok := s.Lookup("c1"); !ok || si.Cgroup != cg || si.RootKind() != "cgroup" {
		t.Fatalf("lookup: %+v %v", si, ok)
	}
	if err := s.RegisterCgroup("c2", cg, "", false); err == nil {
		t.Fatal("a cgroup rooted two sessions")
	}
	// Saved and restored while the cgroup exists (a daemon restart).
	r := NewRegistry()
	for _, si := range s.Live() {
		if err := r.Restore(si); err != nil {
			t.Fatal(err)
		}
	}
	if si, ok := r.Lookup("c1"); !ok || si.Cgroup != cg {
		t.Fatalf("restored: %+v %v", si, ok)
	}
	r.End("c1")
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if n := <-ended; n != "c1" {
		t.Fatalf("ended %q", n)
	}
	if err := s.RegisterCgroup("c3", cg, "", false); err == nil {
		t.Fatal("registered a removed cgroup")
	}
}

// TestKeptSessionJoinAndRestore: a kept session has no root and stays; a
// joined process resolves to it; a saved kept session is restored.
func TestKeptSessionJoinAndRestore(t *testing.T) {
	s := NewRegistry()
	if err := s.RegisterKept("k", "harness"); err != nil {
		t.Fatal(err)
	}
	if si, _ := s.Lookup("k"); si.RootKind() != "none" || !si.Keep || !si.Live {
		t.Fatalf("kept: %+v", si)
	}
	if got := s.Resolve(uint32(os.Getpid())); got != Default {
		t.Fatalf("before joining: %q", got)
	}
	if err := s.Join("k", uint32(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	if got := s.Resolve(uint32(os.Getpid())); got != "k" {
		t.Fatalf("after joining: %q", got)
	}
	if err := s.Join("nope", uint32(os.Getpid())); err == nil {
		t.Fatal("joined a missing session")
	}
	saved := s.Live()
	s.End("k")
	// The joined process left k: a fresh session of its own, never the
	// default one (docs/DESIGN.md#sessions).
	if got, want := s.Resolve(uint32(os.Getpid())), Session(fmt.Sprintf("%s%d", LeftPrefix, os.Getpid())); got != want {
		t.Fatalf("after the end: %q, want %q", got, want)
	}
	if si, ok := s.Lookup(fmt.Sprintf("%s%d", LeftPrefix, os.Getpid())); !ok || si.Command != "(left k)" {
		t.Fatalf("the left session: %+v %v", si, ok)
	}
	r := NewRegistry()
	for _, si := range saved {
		if err := r.Restore(si); err != nil {
			t.Fatal(err)
		}
	}
	if si, ok := r.Lookup("k"); !ok || !si.Keep || !si.Started.Equal(saved[0].Started) {
		t.Fatalf("restored: %+v %v", si, ok)
	}
}
