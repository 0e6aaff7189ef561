package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
)

// TestParseSpecBranch: branch and isolation in the JSON, key=value and
// one-line forms; a bad isolation, a bad name, or both, are EINVAL.
func TestParseSpecBranch(t *testing.T) {
	for in, want := range map[string]Spec{
		`{"subagent":"sh","prompt":"p","branch":"b1"}`:         {Subagent: "sh", Prompt: "p", Branch: "b1"},
		"subagent=sh\nisolation=branch\nprompt=make test":      {Subagent: "sh", Prompt: "make test", Isolation: IsolationBranch},
		"subagent=sh isolation=branch prompt=echo a=b":         {Subagent: "sh", Prompt: "echo a=b", Isolation: IsolationBranch},
		"subagent=sh branch=x.y prompt=true":                   {Subagent: "sh", Prompt: "true", Branch: "x.y"},
		`{"subagent":"sh","prompt":"p","isolation":"none"}`:    {Subagent: "sh", Prompt: "p", Isolation: "none"},
		"subagent=sh prompt=branch=not-a-key isolation=branch": {Subagent: "sh", Prompt: "branch=not-a-key isolation=branch"},
	} {
		got, err := ParseSpec([]byte(in))
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, reason := range map[string]string{
		`{"subagent":"sh","prompt":"p","isolation":"vm"}`:                  "isolation",
		`{"subagent":"sh","prompt":"p","branch":"../x"}`:                   "bad branch name",
		`{"subagent":"sh","prompt":"p","branch":"b","isolation":"branch"}`: "not both",
		"subagent=sh colour=red prompt=p":                                  "unknown key",
		"subagent=sh loose prompt=p":                                       "want subagent=TYPE",
		"subagent=sh branch=a branch=b prompt=p":                           "given twice",
	} {
		_, err := ParseSpec([]byte(in))
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), reason) {
			t.Errorf("ParseSpec(%q) = %v, want ErrBadInput with %q", in, err, reason)
		}
	}
}

// TestSpawnInBranchArgv: a task under isolation=branch starts its
// subagent through `RUBINOFS run --mount=M --new-branch=task-ID -- ARGV`
// (Config.Rubinofs is echo here, so the task prints its argv), named
// task-ID-RUN when task-ID is left from before; its result names the
// branch, and says it is not there (echo made none).
func TestSpawnInBranchArgv(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a task in a branch needs a root spawner")
	}
	state := t.TempDir()
	rn := newRunner(t, func(c *Config) { c.StateDir, c.Rubinofs = state, "/bin/echo" })
	if err := os.MkdirAll(filepath.Join(state, "branches", "task-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"task-1-" + rn.run, "task-2"} {
		tk, err := rn.Spawn(Spec{Subagent: "sh", Prompt: "true", Isolation: IsolationBranch}, "", "default", 0)
		if err != nil {
			t.Fatal(err)
		}
		tk = waitDone(t, rn, tk.ID)
		argv := "run --mount=" + rn.cfg.Mount + " --new-branch=" + want + " -- /bin/sh -c true"
		if tk.Status != StatusDone || tk.Branch != want || !tk.NewBranch || tk.Result != argv {
			t.Fatalf("task %s: %s, branch %q, result %q; want done in %s with %q", tk.ID, tk.Status, tk.Branch, tk.Result, want, argv)
		}
		if note := rn.withBranchNote(tk, tk.Result); !strings.HasSuffix(note, "\nbranch "+want+": not there (never made, or discarded since)") {
			t.Fatalf("result with the note: %q", note)
		}
	}
}

// TestSpawnInBranchRefused: a spawner that is not root is refused with
// EPERM and a reason naming isolation=branch; a branch=NAME that does not
// exist is ENOENT; a runner that knows no rubinofs executable refuses.
// Nothing is reserved.
func TestSpawnInBranchRefused(t *testing.T) {
	state := t.TempDir()
	rn := newRunner(t, func(c *Config) { c.StateDir, c.Rubinofs = state, "/bin/echo" })
	bare := newRunner(t, nil)
	root := &Spawner{Uid: 0}
	for _, c := range []struct {
		rn    *Runner
		spec  Spec
		sp    *Spawner
		errno syscall.Errno
		want  string
	}{
		{rn, Spec{Subagent: "sh", Prompt: "true", Isolation: IsolationBranch}, &Spawner{Uid: 65534}, syscall.EPERM, "isolation=branch"},
		{rn, Spec{Subagent: "sh", Prompt: "true", Branch: "b"}, &Spawner{Uid: 1000}, syscall.EPERM, "root spawner"},
		{rn, Spec{Subagent: "sh", Prompt: "true", Branch: "nope"}, root, syscall.ENOENT, "rubinofs branch new nope"},
		{bare, Spec{Subagent: "sh", Prompt: "true", Isolation: IsolationBranch}, root, syscall.EPERM, "rubinofs executable"},
	} {
		_, err := c.rn.SpawnAs(c.spec, "", "default", c.sp.Uid, c.sp)
		var ce *ctltree.Error
		if !errors.As(ctlErrnos.Map(err), &ce) || ce.Errno != c.errno || !strings.Contains(err.Error(), c.want) {
			t.Errorf("spawn %+v as uid %d: %v, want errno %v with %q", c.spec, c.sp.Uid, err, c.errno, c.want)
		}
	}
	if n := len(rn.Registry().List()) + len(bare.Registry().List()); n != 0 {
		t.Fatalf("%d tasks reserved", n)
	}
}

// TestTaskEnvDropsBranch: a task never inherits its spawner's
// RUBINO_BRANCH (a `run --branch` sets it for its own command only).
func TestTaskEnvDropsBranch(t *testing.T) {
	rn := newRunner(t, nil)
	env := rn.taskEnv(SubagentType{}, "3", &Spawner{Env: []string{EnvBranch + "=b", "X=1"}, Mount: "/m"})
	if slices.Contains(env, EnvBranch+"=b") || !slices.Contains(env, "X=1") {
		t.Fatalf("task env %v", env)
	}
}
