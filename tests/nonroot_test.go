package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// nonRootScript runs as uid 65534 in a mount namespace of its own whose
// /dev/fuse is a 0666 node, so that fusermount3 opens it as it would on a
// desktop (this machine's /dev/fuse may be root's alone). $R is the
// binary, $WS and $MNT the workspace and mountpoint, $HOME 65534's. It
// echoes the mount's line first (the daemon's pid, for the cleanup), and checks what a
// developer does on a mount of their own: git, a refusal and its
// remedy, a guard session, a checkpoint and rewind, a task, the status,
// which shows root's mount of the same workspace (made before, at $MNT2)
// as a peer, by its mountpoint.
const nonRootScript = `set -e
fail() { echo "FAIL: $*"; exit 1; }
out=$("$R" mount --daemon "$WS" "$MNT")
echo "$out"
cd "$MNT"
grep " $MNT " /proc/self/mountinfo | grep -q "user_id=65534" || fail "not a mount of uid 65534 (fusermount3): $(grep " $MNT " /proc/self/mountinfo)"
case "$out" in *"/.local/state/rubinofs/"*) ;; *) fail "state not under HOME: $out";; esac
git init -q . && git config user.email a@b && git config user.name a
echo one > a.txt && git add -A && git commit -qm one
if (echo blind > outside.txt) 2>/dev/null; then fail "a blind overwrite of outside.txt was allowed"; fi
[ "$(cat outside.txt)" = "the user's" ] || fail "outside.txt changed by a refused write"
echo seen >> outside.txt
if "$R" run -- sh -c 'rm a.txt' 2>/dev/null; then fail "a fresh session removed a.txt unread"; fi
cp=$("$R" checkpoint before)
echo two > a.txt && rm outside.txt
"$R" rewind --to "$cp" >/dev/null
[ "$(cat a.txt)" = one ] || fail "rewind left a.txt as $(cat a.txt)"
[ -f outside.txt ] || fail "rewind did not bring outside.txt back"
[ -z "$(git status --short a.txt)" ] || fail "git sees a.txt changed after the rewind"
task=$("$R" agents spawn -- 'id -u > task-uid')
"$R" agents wait "$task" >/dev/null
[ "$(cat task-uid)" = 65534 ] || fail "the task ran as uid $(cat task-uid)"
"$R" status | grep -q "mode: *enforce" || fail "status: $("$R" status)"
"$R" status | grep -q "shared: *peer" || fail "root's mount of the same workspace is not its peer: $("$R" status | grep shared)"
"$R" status | grep -q "peer_mounts: .*$MNT2" || fail "status does not name root's mount $MNT2: $("$R" status | grep peer_mounts)"
cd /
"$R" unmount "$MNT"
echo DONE
`

// TestNonRootDaemon: a user other than root mounts through fusermount3
// (go-fuse's non-direct mount) and keeps state under their HOME; git, the
// guard's refusal and its remedy (read first), a `run` session, a
// checkpoint and rewind, a task (run as that user) and status work, and
// `rubinofs unmount` ends the daemon. Every other real-mount test runs the
// daemon as root with mount(2), so this is the one that walks the path a
// developer's own mount takes. Root mounts the same workspace too: the two
// mounts find each other in the mount table (their peer registries are
// per user) and are both in shared mode.
func TestNonRootDaemon(t *testing.T) {
	requireFuse(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a namespace whose /dev/fuse uid 65534 may open")
	}
	for _, tool := range []string{"setpriv", "unshare", "git", "fusermount3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is needed", tool)
		}
	}
	bin := sharedBin(t)
	tmp := t.TempDir()
	openUp(t, tmp)
	ws, mnt, home := filepath.Join(tmp, "ws"), filepath.Join(tmp, "mnt"), filepath.Join(tmp, "home")
	mnt2, rootState := filepath.Join(tmp, "mnt2"), filepath.Join(tmp, "root-state")
	for _, d := range []string{ws, mnt, home, mnt2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "outside.txt"), []byte("the user's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, mnt, home, filepath.Join(ws, "outside.txt")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	dev := filepath.Join(tmp, "fuse")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(10<<8|229)); err != nil {
		t.Skipf("cannot make a FUSE device node here: %v", err)
	}
	if err := os.Chmod(dev, 0o666); err != nil { // mknod's mode passes the umask
		t.Fatal(err)
	}
	script := filepath.Join(tmp, "nonroot.sh")
	if err := os.WriteFile(script, []byte(nonRootScript), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", `
mount --bind "$DEV" /dev/fuse || exit 1
"$R" mount --daemon --state-dir "$RSTATE" "$WS" "$MNT2" || exit 1
setpriv --reuid=65534 --regid=65534 --clear-groups sh "$SCRIPT"; rc=$?
"$R" status --mount "$MNT2" | grep -q "shared: *peer" || { echo "FAIL: uid 65534's mount was not root's peer"; rc=1; }
"$R" unmount "$MNT2" || rc=1
exit $rc`)
	cmd.Dir = tmp
	cmd.Env = append(testEnv(home), "R="+bin, "WS="+ws, "MNT="+mnt, "MNT2="+mnt2, "RSTATE="+rootState, "DEV="+dev, "SCRIPT="+script)
	out, err := runCombined(t, cmd)
	for _, sm := range daemonPidRe.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(sm[1])
		// The mount lives in the namespace, which ends with its last
		// process: the daemon, if the script failed before unmounting.
		t.Cleanup(func() {
			if syscall.Kill(pid, 0) == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			waitPidGone(pid)
		})
		if err == nil && !waitPidGone(pid) {
			t.Errorf("daemon pid %d still running after its unmount", pid)
		}
	}
	if err != nil || !strings.Contains(out, "DONE") {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}
