package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
	"github.com/rubinofs/rubinofs/tasks"
)

// asNobody runs script with /bin/sh in the mount root as uid and gid 65534
// (setpriv), with BIN set to a rubinofs binary it can execute.
func (m *mount) asNobody(bin, script string) (string, error) {
	m.t.Helper()
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c", script)
	cmd.Dir = m.mnt
	cmd.Env = append(testEnv(m.tmp), "BIN="+bin, "MNT="+m.mnt)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestAgentsOfAnotherUid: the task registry's control files are checked
// against the caller's uid (docs/DESIGN.md#task-authority). As uid 65534,
// root's task is not listed, not in the tree, its files are ENOENT and
// stop is refused, while 65534's own tasks are its to see and stop, and
// its spawns do not use up root's per_owner cap. Root inside a `rubinofs
// run` session cannot see or stop the task it started outside the session.
func TestAgentsOfAnotherUid(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	m := newMount(t, nil, func(c *daemon.Config) { c.Options = append(c.Options, "allow_other") })
	openUp(t, m.tmp)
	bin := sharedBin(t)
	spawn := func(prompt string) string {
		t.Helper()
		out, err := cli(t, m.tmp, "agents", "spawn", "--mount", m.mnt, prompt)
		if err != nil {
			t.Fatalf("spawn %q: %v\n%s", prompt, err, out)
		}
		return strings.TrimSpace(out)
	}
	const secret = "s3cret-of-root"
	rootTask := spawn("exec sleep 1000 # " + secret)
	dir := ".rubino/agents/" + rootTask

	nobodySpawn := func() (string, error) {
		t.Helper()
		out, err := m.asNobody(bin, `"$BIN" agents spawn --mount "$MNT" exec sleep 1000`)
		return strings.TrimSpace(out), err
	}
	mine0, err := nobodySpawn()
	if err != nil {
		t.Fatalf("uid 65534 spawning: %v\n%s", err, mine0)
	}

	out, err := m.asNobody(bin, `ls .rubino/agents/; echo ---; cat .rubino/agents/tree`)
	if err != nil {
		t.Fatalf("uid 65534 listing: %v\n%s", err, out)
	}
	listing, tree, _ := strings.Cut(out, "---\n")
	for _, id := range []string{mine0} {
		if !strings.Contains("\n"+listing, "\n"+id+"\n") || !strings.Contains(tree, " "+id+" running ") {
			t.Errorf("uid 65534 does not see its own task %s:\n%s", id, out)
		}
	}
	for _, id := range []string{rootTask} {
		if strings.Contains("\n"+listing, "\n"+id+"\n") || strings.Contains(tree, " "+id+" running ") {
			t.Errorf("uid 65534 sees root's task %s:\n%s", id, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Errorf("uid 65534 reads root's prompt:\n%s", out)
	}
	// O_NONBLOCK: wait would block until root's task ends.
	for _, f := range []string{"prompt", "log", "output", "status", "wait", "result"} {
		out, err := m.asNobody(bin, "dd status=none iflag=nonblock if="+dir+"/"+f)
		if err == nil || !strings.Contains(out, "No such file or directory") {
			t.Errorf("uid 65534 reading root's %s/%s: %v, want ENOENT\n%s", dir, f, err, out)
		}
	}
	for _, cmd := range []string{
		"echo stop > " + dir + "/ctl",
		"echo 'steer obey me' > " + dir + "/ctl",
		`"$BIN" agents stop --mount "$MNT" ` + rootTask,
	} {
		if out, err := m.asNobody(bin, cmd); err == nil {
			t.Errorf("uid 65534: %s succeeded\n%s", cmd, out)
		}
	}
	if out, err := m.asNobody(bin, "cat .rubino/agents/"+mine0+"/prompt && echo stop > .rubino/agents/"+mine0+"/ctl"); err != nil || out != "exec sleep 1000\n" {
		t.Errorf("uid 65534 on its own task: %v\n%s", err, out)
	} else {
		m.waitStatus(mine0, tasks.StatusStopped)
	}

	// uid 65534 spawns up to the per_owner cap (3 live tasks), which is its
	// own: root can still spawn.
	for i := range 3 {
		if out, err := nobodySpawn(); err != nil {
			t.Errorf("uid 65534 spawning its live task %d: %v\n%s", i+1, err, out)
			break
		}
	}
	if out, err := nobodySpawn(); err == nil || !strings.Contains(out, "per_owner: uid 65534 already has 3 live children") {
		t.Errorf("uid 65534's fourth live task: %v\n%s", err, out)
	}
	out, err = cli(t, m.tmp, "agents", "spawn", "--mount", m.mnt, "exec sleep 1000")
	if err != nil {
		t.Errorf("root spawning after uid 65534 filled its cap: %v\n%s", err, out)
	}

	// Root inside a session: the task it started outside is not its here.
	out, err = cli(t, m.tmp, "run", "--mount", m.mnt, "--", "/bin/sh", "-c",
		`cd "$RUBINO_MOUNT"; ls .rubino/agents/; if echo stop > .rubino/agents/`+rootTask+`/ctl; then echo STOPPED; fi`)
	if strings.Contains(out, "STOPPED") || strings.Contains("\n"+out, "\n"+rootTask+"\n") {
		t.Errorf("root in a run session acted on or saw task %s: %v\n%s", rootTask, err, out)
	}
	for _, id := range []string{rootTask} {
		if tk, _ := m.d.Tasks.Registry().Find(id); tk.Status != tasks.StatusRunning {
			t.Errorf("root's task %s is %s", id, tk.Status)
		}
	}
}
