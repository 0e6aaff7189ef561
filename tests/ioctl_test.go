package tests

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIoctlSetflagsIsOwnChange: chattr(1)'s FS_IOC_SETFLAGS through the
// mount changes the backing file's ctime; the daemon makes that change, so
// the watcher must not take it (or the write before it, whose event it
// classifies afterwards against the file's lstat) for an external edit,
// which would drop the file's cached state and make the writer's next
// write through another handle stale. stress-ng's iomix stressor toggles
// inode flags between writes and was refused this way.
func TestIoctlSetflagsIsOwnChange(t *testing.T) {
	const fsNoatimeFl = 0x80 // FS_NOATIME_FL of linux/fs.h: harmless to toggle
	m := newMount(t, nil, nil)
	fd, err := unix.Open(m.path("f"), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i := 0; i < 200; i++ {
		if _, err := unix.Pwrite(fd, []byte("own bytes\n"), int64(i*10)); err != nil {
			t.Fatal(err)
		}
		flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
		if err != nil {
			t.Skipf("FS_IOC_GETFLAGS through the mount: %v (the backing file system has no inode flags)", err)
		}
		if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags^fsNoatimeFl)); err != nil {
			t.Skipf("FS_IOC_SETFLAGS through the mount: %v", err)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(m.backing("f"), &st); err != nil {
		t.Fatal(err)
	}
	// A barrier: an external edit made after every own change above. The
	// watcher classifies events in order, so once the marker's batch is
	// applied every event of f has been judged.
	mark := m.appliedMark()
	if err := os.WriteFile(m.backing("marker"), []byte("external\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "marker")
	for _, evs := range m.mt.Applied() {
		for _, ev := range evs {
			if ev.Path == "f" {
				t.Errorf("the watcher took an own change of f for an external one: %+v", ev)
			}
		}
	}
	if _, err := unix.Pwrite(fd, []byte("still mine\n"), 0); err != nil {
		t.Errorf("write after own chattr: %v", err)
	}
	if d := m.denials(); len(d) > 0 {
		t.Errorf("refused: %v", d)
	}
}
