package tests

// State directories left behind by mounts of workspaces that are gone:
// `rubinofs doctor` lists them, `rubinofs state prune` and the retention
// at mount remove them, and never one a live mount holds or one whose
// workspace exists (docs/DESIGN.md#state-retention).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatePrune mounts three workspaces through the CLI with state
// directories under a temporary state root ($XDG_STATE_HOME/rubinofs):
// one is unmounted and its workspace removed (gone), one unmounted with
// its workspace kept, one stays mounted while its workspace is moved away
// (gone, but in use). Each mount's own retention at the default 30 days
// removes nothing (all are fresh). doctor lists the gone one only, with its size; prune
// --dry-run removes nothing, nor does uid 65534's prune of this root;
// prune removes it and keeps the other two.
// Then a remount with --state-retention removes another gone one by
// itself (its unmount waits for the retention: no wait on time).
func TestStatePrune(t *testing.T) {
	requireFuse(t)
	tmp := t.TempDir()
	xdg := filepath.Join(tmp, "xdg")
	root := filepath.Join(xdg, "rubinofs")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", xdg) // the CLI and its daemons: their state root is root
	mountAt := func(name string, extra ...string) *cliMount {
		dir := filepath.Join(tmp, name)
		os.Mkdir(dir, 0o755)
		ws := makeWorkspace(t, dir, map[string]string{"f": "x\n"})
		return newCLIMount(t, dir, ws, filepath.Join(root, name), extra...)
	}
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }

	gone := mountAt("gone")
	if err := os.WriteFile(gone.path("new"), []byte("journaled\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gone.unmount()
	if err := os.RemoveAll(gone.ws); err != nil {
		t.Fatal(err)
	}
	kept := mountAt("kept")
	kept.unmount()
	live := mountAt("live")
	if err := os.Rename(live.ws, live.ws+".away"); err != nil {
		t.Fatal(err)
	}

	out, code := cliCode(t, tmp, "doctor")
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s", code, out)
	}
	if doctorLines(out)["stale state"][0] != "warn" || !strings.Contains(out, "1 state directories of vanished workspaces") ||
		!strings.Contains(out, gone.state+" (") || !strings.Contains(out, "workspace "+gone.ws+" (gone)") ||
		strings.Contains(out, kept.state) || strings.Contains(out, live.state) || !strings.Contains(out, "rubinofs state prune") {
		t.Fatalf("doctor does not list exactly the gone workspace's state directory %s:\n%s", gone.state, out)
	}

	out, code = cliCode(t, tmp, "state", "ls", "--json")
	var ls []struct{ Dir, Kind, Workspace string }
	if err := json.Unmarshal([]byte(out), &ls); code != 0 || err != nil {
		t.Fatalf("state ls --json: exit %d %v\n%s", code, err, out)
	}
	kinds := map[string]string{}
	for _, e := range ls {
		kinds[e.Dir] = e.Kind
	}
	if kinds[gone.state] != "gone" || kinds[kept.state] != "workspace" || kinds[live.state] != "in use" || len(kinds) != 3 {
		t.Fatalf("state ls: %v", kinds)
	}

	if out, code = cliCode(t, tmp, "state", "prune", "--dry-run"); code != 0 || !strings.Contains(out, "would remove 1 ") || !exists(gone.state) {
		t.Fatalf("state prune --dry-run: exit %d, %s exists %v\n%s", code, gone.state, exists(gone.state), out)
	}
	// Another uid pointed at this root ($XDG_STATE_HOME) prunes nothing:
	// it is not that uid's own state root.
	if os.Geteuid() == 0 {
		openUp(t, tmp)
		os.Chmod(xdg, 0o755)
		nb := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sharedBin(t), "state", "prune")
		out, err := runCombined(t, nb)
		if exitCode(err) != 1 || !strings.Contains(out, "owned by uid 0, not 65534") || !exists(gone.state) {
			t.Fatalf("state prune as uid 65534 in root's state root: %v, %s exists %v\n%s", err, gone.state, exists(gone.state), out)
		}
	}
	if out, code = cliCode(t, tmp, "state", "prune"); code != 0 || !strings.Contains(out, "removed 1 ") {
		t.Fatalf("state prune: exit %d\n%s", code, out)
	}
	if exists(gone.state) || !exists(kept.state) || !exists(live.state) {
		t.Fatalf("after prune: gone %v (want removed), kept %v, live %v (want both)", exists(gone.state), exists(kept.state), exists(live.state))
	}
	if !live.mounted() || live.status()["pid"] == nil {
		t.Fatal("the live mount does not answer after the prune")
	}
	if err := os.Rename(live.ws+".away", live.ws); err != nil {
		t.Fatal(err)
	}
	live.unmount()

	// Retention at mount: another gone workspace's state directory goes
	// with the next mount (a remount of kept, retention 1ns: any age); the
	// others stay.
	gone2 := mountAt("gone2")
	gone2.unmount()
	os.RemoveAll(gone2.ws)
	kept.mountDaemon("--state-retention=1ns")
	kept.unmount() // Close waits for the retention
	if exists(gone2.state) || !exists(kept.state) || !exists(live.state) {
		t.Fatalf("after a mount with retention: gone2 %v (want removed), kept %v, live %v (want both)",
			exists(gone2.state), exists(kept.state), exists(live.state))
	}
	if b, _ := os.ReadFile(filepath.Join(kept.state, "rubinofs.log")); !strings.Contains(string(b), "state directory removed") ||
		!strings.Contains(string(b), gone2.state) {
		t.Errorf("the retention's removal of %s is not in the log:\n%s", gone2.state, b)
	}
}
