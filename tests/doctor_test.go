package tests

// `rubinofs doctor`: it passes on a machine the
// real-mount tests run on, and explains a broken setup with a fix for each
// failed check (the hidden flags point it at broken stand-ins for
// /dev/fuse, /etc/fuse.conf, fusermount3 and the inotify limit).

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// doctorLines maps each check's name to its level and the fix line after
// it ("" when none).
func doctorLines(out string) map[string][2]string {
	res := map[string][2]string{}
	lines := strings.Split(out, "\n")
	re := regexp.MustCompile(`^(ok|warn|FAIL) +([^:]+): `)
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		fix := ""
		if i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "fix: ") {
			fix = strings.TrimPrefix(strings.TrimSpace(lines[i+1]), "fix: ")
		}
		res[m[2]] = [2]string{m[1], fix}
	}
	return res
}

// TestDoctorPasses runs doctor on this machine (where the real-mount tests
// run) with and without a workspace and --allow-other: exit 0, no FAIL.
func TestDoctorPasses(t *testing.T) {
	requireFuse(t)
	ws := t.TempDir()
	for _, d := range []string{"a/b", "c"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	for _, args := range [][]string{{"doctor"}, {"doctor", "--allow-other", ws}} {
		out, err := cli(t, t.TempDir(), args...)
		if err != nil || strings.Contains(out, "FAIL") || !strings.Contains(out, "all checks passed") {
			t.Fatalf("rubinofs %v: %v\n%s", args, err, out)
		}
		got := doctorLines(out)
		for _, check := range []string{"/dev/fuse", "mount privilege", "fusermount3", "passthrough", "inotify watches", "state directory", "mount helper"} {
			if _, ok := got[check]; !ok {
				t.Errorf("rubinofs %v: no %q check:\n%s", args, check, out)
			}
		}
		if len(args) > 1 {
			if _, ok := got["allow_other"]; !ok {
				t.Errorf("--allow-other: no allow_other check:\n%s", out)
			}
			if !strings.Contains(out, "has 4 directories to watch") {
				t.Errorf("inotify check does not count the workspace's 4 directories:\n%s", out)
			}
			// This machine's ext4 under Linux 6.13+ gives each change after a
			// stat its own ctime (the daemon's probe, docs/DESIGN.md#fine-ctime).
			if r, ok := got["timestamps"]; !ok || r[0] != "ok" {
				t.Errorf("timestamps check: %q, want ok:\n%s", r, out)
			}
		} else if _, ok := got["timestamps"]; ok {
			t.Errorf("a timestamps check without a workspace:\n%s", out)
		}
	}
}

// TestDoctorBrokenSetup shows doctor a broken machine and checks that each
// problem is a FAIL with its fix, and the exit status is 1.
func TestDoctorBrokenSetup(t *testing.T) {
	tmp := t.TempDir()
	if _, err := exec.LookPath("id"); err != nil {
		t.Skip("no id(1)")
	}
	if out, err := exec.Command("id", "-u", "nobody").Output(); err != nil || len(out) == 0 {
		t.Skip("no user nobody to check for")
	}
	fuseConf := filepath.Join(tmp, "fuse.conf")
	os.WriteFile(fuseConf, []byte("# mount_max = 1000\n#user_allow_other\n"), 0o644)
	fusermount := filepath.Join(tmp, "fusermount3")
	os.WriteFile(fusermount, []byte("#!/bin/sh\n"), 0o755) // not setuid
	watches := filepath.Join(tmp, "max_user_watches")
	os.WriteFile(watches, []byte("3\n"), 0o644)
	ws := filepath.Join(tmp, "ws")
	for _, d := range []string{"a/b", "c/d", "e"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	state := filepath.Join(tmp, "state")
	os.Mkdir(state, 0o700)
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}

	// As the user nobody would mount, with allow_other: no /dev/fuse,
	// fusermount3 not setuid, no user_allow_other.
	out, err := cli(t, tmp, "doctor", "--user", "nobody", "--allow-other",
		"--dev-fuse", filepath.Join(tmp, "no-such-fuse"), "--fuse-conf", fuseConf, "--fusermount", fusermount,
		"--max-user-watches-file", watches, "--state-dir", filepath.Join(tmp, "nobody-state"))
	if exitCode(err) != 1 {
		t.Fatalf("broken setup: exit status %d, want 1:\n%s", exitCode(err), out)
	}
	got := doctorLines(out)
	for check, fix := range map[string]string{
		filepath.Join(tmp, "no-such-fuse"): "modprobe fuse",
		"fusermount3":                      "chmod u+s " + fusermount,
		"allow_other":                      "echo user_allow_other >> " + fuseConf,
	} {
		if got[check][0] != "FAIL" || !strings.Contains(got[check][1], fix) {
			t.Errorf("check %q: %v, want FAIL with fix %q:\n%s", check, got[check], fix, out)
		}
	}

	// With user_allow_other, allow_other for nobody is a warning: the
	// daemon would serve other users as nobody.
	os.WriteFile(fuseConf, []byte("user_allow_other\n"), 0o644)
	out, _ = cli(t, tmp, "doctor", "--user", "nobody", "--allow-other", "--fuse-conf", fuseConf, "--fusermount", fusermount)
	if got := doctorLines(out)["allow_other"]; got[0] != "warn" || !strings.Contains(out, "will belong to nobody") || !strings.Contains(got[1], "mount as root") {
		t.Errorf("allow_other for nobody with user_allow_other: %v, want a warning that nobody owns others' files:\n%s", got, out)
	}

	// No fusermount3 at all, for a user who needs it.
	out, err = cli(t, tmp, "doctor", "--user", "nobody", "--fusermount", filepath.Join(tmp, "absent"))
	if got := doctorLines(out)["fusermount3"]; exitCode(err) != 1 || got[0] != "FAIL" || !strings.Contains(got[1], "apt-get install fuse3") {
		t.Errorf("missing fusermount3: exit %d, %v:\n%s", exitCode(err), got, out)
	}

	// As the caller: a world-writable state directory and an inotify
	// limit (3) below the workspace's directory count (6).
	// (/dev/null stands in for /dev/fuse: a warning, so that this part does
	// not depend on the machine's FUSE.)
	out, err = cli(t, tmp, "doctor", "--dev-fuse", "/dev/null", "--max-user-watches-file", watches, "--state-dir", state, ws)
	if exitCode(err) != 1 {
		t.Fatalf("world-writable state dir, tiny inotify limit: exit status %d, want 1:\n%s", exitCode(err), out)
	}
	got = doctorLines(out)
	if c := got["inotify watches"]; c[0] != "FAIL" || !strings.Contains(c[1], "sysctl fs.inotify.max_user_watches=524288") {
		t.Errorf("inotify check: %v, want FAIL with the sysctl fix:\n%s", c, out)
	}
	if c := got["state directory"]; c[0] != "FAIL" || c[1] != "chmod 700 "+state {
		t.Errorf("state directory check: %v, want FAIL with chmod 700:\n%s", c, out)
	}
	if !strings.Contains(out, "check(s) failed") {
		t.Errorf("no summary of the failures:\n%s", out)
	}

	// Fixed, the same checks pass.
	os.Chmod(state, 0o700)
	os.WriteFile(watches, []byte("524288\n"), 0o644)
	out, _ = cli(t, tmp, "doctor", "--dev-fuse", "/dev/null", "--max-user-watches-file", watches, "--state-dir", state, ws)
	got = doctorLines(out)
	if got["inotify watches"][0] != "ok" || got["state directory"][0] != "ok" {
		t.Errorf("after the fixes: inotify %v, state %v:\n%s", got["inotify watches"], got["state directory"], out)
	}
}
