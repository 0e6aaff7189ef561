package tests

// mount(8) integration: rubinofs as the helper
// mount.fuse.rubinofs, called directly as mount(8) calls it, through a real
// `mount -t fuse.rubinofs`, and through an fstab line. Every test unmounts
// and waits until the daemon process has exited.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fstype returns the file system type of the mount at path from
// /proc/self/mountinfo ("" when not a mount point; the top one when
// several are stacked).
func fstype(t testing.TB, path string) string {
	t.Helper()
	typ := ""
	for _, f := range mountinfo(t, path) {
		for i, x := range f {
			if x == "-" && i+1 < len(f) {
				typ = f[i+1] // the last mount on path wins
			}
		}
	}
	return typ
}

// checkWarnMount checks the mount at dm.mnt is a fuse.rubinofs mount that
// answers in warn mode: a blind overwrite of f (never read) is allowed and
// logged, where enforce would refuse it. It learns the daemon's pid
// (adopt), for dm.unmount and the cleanup.
func checkWarnMount(t *testing.T, dm *cliMount) {
	t.Helper()
	if got := fstype(t, dm.mnt); got != "fuse.rubinofs" {
		t.Fatalf("%s: file system type %q, want fuse.rubinofs", dm.mnt, got)
	}
	dm.adopt()
	if mode := dm.status()["mode"]; mode != "warn" {
		t.Fatalf("mode %v, want warn (from -o mode=warn)", mode)
	}
	sh := exec.Command("/bin/sh", "-c", "echo blind > "+shq(filepath.Join(dm.mnt, "f")))
	sh.Dir = dm.tmp
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("blind overwrite under mode=warn: %v %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dm.ws, "f")); string(b) != "blind\n" {
		t.Fatalf("backing f = %q after a warn-mode overwrite", b)
	}
}

// TestMountHelperDirect calls rubinofs through a symlink named
// mount.fuse.rubinofs exactly as mount(8) does (SOURCE TARGET, flags, -o
// with mount(8)'s own options mixed in), and checks an unknown option is
// refused with status 32 naming the known ones, -f mounts nothing, and
// fuse3's mount.fuse form (`rubinofs /SOURCE TARGET -o OPTS`) works too.
func TestMountHelperDirect(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	helper := filepath.Join(dm.tmp, "sbin", "mount.fuse.rubinofs")
	os.Mkdir(filepath.Dir(helper), 0o755)
	if err := os.Symlink(rubinofsBin(t), helper); err != nil {
		t.Fatal(err)
	}

	// An unknown option: status 32, the name and the known ones, no mount.
	out, err := runCombined(t, exec.Command(helper, dm.ws, dm.mnt, "-o", "rw,mode=warn,frobnicate=1,state_dir="+dm.state))
	if exitCode(err) != 32 || !strings.Contains(out, `unknown mount option "frobnicate=1"`) ||
		!strings.Contains(out, "known:") || !strings.Contains(out, "mode=") {
		t.Fatalf("unknown option: status %d, want 32 and a clear message:\n%s", exitCode(err), out)
	}
	if isMounted(t, dm.mnt) {
		t.Fatal("mounted despite an unknown option")
	}
	// A value option without a value is refused too.
	out, err = runCombined(t, exec.Command(helper, dm.ws, dm.mnt, "-o", "mode"))
	if exitCode(err) != 32 || !strings.Contains(out, "needs a value") {
		t.Fatalf("-o mode: status %d:\n%s", exitCode(err), out)
	}
	// -f (fake) with -v: says what it would run, mounts nothing.
	out, err = runCombined(t, exec.Command(helper, dm.ws, dm.mnt, "-f", "-v", "-o", "mode=warn,nowatch,state_dir="+dm.state))
	if err != nil || !strings.Contains(out, "mount --daemon --mode=warn --watch=false --state-dir="+dm.state) {
		t.Fatalf("-f -v: %v\n%s", err, out)
	}
	if isMounted(t, dm.mnt) {
		t.Fatal("-f mounted")
	}

	// As mount(8) calls it: mount(8)'s options are ignored, -n and -s
	// accepted, and the helper returns once the mount answers.
	opts := "rw,mode=warn,_netdev,nofail,noauto,x-systemd.automount,comment=test,noatime,state_dir=" + dm.state
	out, err = runCombined(t, exec.Command(helper, dm.ws, dm.mnt, "-n", "-s", "-o", opts))
	if err != nil {
		t.Fatalf("mount.fuse.rubinofs %s %s -o %s: %v\n%s", dm.ws, dm.mnt, opts, err, out)
	}
	if len(out) != 0 {
		t.Errorf("the helper printed on success (mount(8)'s helpers are silent): %q", out)
	}
	checkWarnMount(t, dm)
	dm.unmount()

	// fuse3's mount.fuse runs `rubinofs SOURCE TARGET -o OPTS` from $PATH.
	out, err = cli(t, "", dm.ws, dm.mnt, "-o", "mode=warn,allow_other,state_dir="+dm.state)
	if err != nil {
		t.Fatalf("rubinofs %s %s -o ...: %v\n%s", dm.ws, dm.mnt, err, out)
	}
	dm.adopt()
	if fstype(t, dm.mnt) != "fuse.rubinofs" || !hasOption(t, dm.mnt, "allow_other") {
		t.Fatalf("mount.fuse form: not a fuse.rubinofs mount with allow_other")
	}
	dm.unmount()
}

// hasOption reports whether the mount at path has opt among its super
// options in /proc/self/mountinfo.
func hasOption(t testing.TB, path, opt string) bool {
	t.Helper()
	for _, f := range mountinfo(t, path) {
		for _, o := range strings.Split(f[len(f)-1], ",") {
			if o == opt {
				return true
			}
		}
	}
	return false
}

// installHelper symlinks the built CLI as /sbin/mount.fuse.rubinofs for
// the test (removed in t.Cleanup). It skips when /sbin is not writable and
// refuses to replace a helper the test did not install.
func installHelper(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mount"); err != nil {
		t.Skip("no mount(8) (util-linux)")
	}
	const helper = "/sbin/mount.fuse.rubinofs"
	if _, err := os.Lstat(helper); err == nil {
		t.Skipf("%s exists already (not installed by this test): not replacing it", helper)
	}
	if err := os.Symlink(rubinofsBin(t), helper); err != nil {
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EROFS) {
			t.Skipf("cannot install %s (%v): /sbin is not writable here", helper, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(helper) })
}

// TestMountTypeFuseRubinofs runs the real `mount -t fuse.rubinofs WS MNT -o
// mode=warn,_netdev,...` with the helper installed in /sbin, and unmounts
// with umount(8).
func TestMountTypeFuseRubinofs(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	installHelper(t)
	out, err := runCombined(t, exec.Command("mount", "-t", "fuse.rubinofs", dm.ws, dm.mnt, "-o", "mode=warn,_netdev,state_dir="+dm.state))
	if err != nil {
		t.Fatalf("mount -t fuse.rubinofs: %v\n%s", err, out)
	}
	checkWarnMount(t, dm)
	// mount(8) passes the refusal of an unknown option on, with status 32.
	mnt2 := filepath.Join(dm.tmp, "mnt2")
	os.Mkdir(mnt2, 0o755)
	out, err = runCombined(t, exec.Command("mount", "-t", "fuse.rubinofs", dm.ws, mnt2, "-o", "bogus_option,state_dir="+dm.state))
	if exitCode(err) != 32 || !strings.Contains(out, `unknown mount option "bogus_option"`) {
		t.Errorf("mount -o bogus_option: status %d, want 32 with the reason:\n%s", exitCode(err), out)
	}
	dm.unmount("umount", dm.mnt)
}

// TestMountFstabLine mounts from an fstab line (mount --fstab FILE MNT, as
// mount(8) reads /etc/fstab) carrying mount(8)'s and systemd's own options.
func TestMountFstabLine(t *testing.T) {
	dm := cliDirs(t, map[string]string{"f": "x\n"})
	installHelper(t)
	fstab := filepath.Join(dm.tmp, "fstab")
	line := fmt.Sprintf("# rubinofs test\n%s %s fuse.rubinofs defaults,mode=warn,_netdev,nofail,x-systemd.requires=network-online.target,state_dir=%s 0 0\n",
		dm.ws, dm.mnt, dm.state)
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCombined(t, exec.Command("mount", "--fstab", fstab, dm.mnt))
	if err != nil {
		t.Fatalf("mount --fstab %s %s: %v\n%s\n%s", fstab, dm.mnt, err, out, line)
	}
	checkWarnMount(t, dm)
	dm.unmount("umount", dm.mnt)
}
