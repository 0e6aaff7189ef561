package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// TestSessionNameNotInherited: a session name is its uid's while anything
// of an earlier session of that name is kept. Root's session y is refused
// a write and ends; root's session z changes a file and ends. While they
// are listed among the ended sessions, uid 65534 may not register either
// name; once they are not, it still may not take z, whose journal log is
// kept, and it may take y, whose session then starts with no denials of
// root's. uid 65534's own session n1, forgotten the same way, is still
// its to list the changes of (its journal log names it); root's z is
// not. Before, uid 65534's new session y showed root's command line,
// denial count, refusals and summary, its z went on with root's
// journal, and its own forgotten session was root's alone.
func TestSessionNameNotInherited(t *testing.T) {
	m := newMount(t, map[string]string{"secret.txt": "s\n", "a.txt": "a\n"}, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		pub := filepath.Join(c.Workspace, "pub")
		if err := os.Mkdir(pub, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(pub, 0o777); err != nil {
			t.Fatal(err)
		}
	})
	openUp(t, m.tmp)
	bin := shq(sharedBin(t))
	if _, err := m.sh(bin + ` run --session y -- sh -c 'echo x > secret.txt'`); err == nil {
		t.Fatal("session y's blind write was allowed")
	}
	m.mustSh(bin + ` run --session z -- sh -c 'cat a.txt > /dev/null && echo b > a.txt'`)

	for _, name := range []string{"y", "z"} {
		out, err := m.sh(asNobody + bin + ` run --session ` + name + ` -- true`)
		if err == nil || !strings.Contains(out, "was the name of uid 0's session, which ended and is still listed") {
			t.Errorf("uid 65534 registered %s, root's ended session's name: %v\n%s", name, err, out)
		}
	}
	m.mustSh(asNobody + bin + ` run --session n1 -- sh -c 'echo mine > pub/n1.txt'`)
	// 64 more ended sessions push y, z and n1 out of the ended list.
	m.mustSh(`for i in $(seq 64); do ` + bin + ` run --session e$i -- true || exit 1; done`)
	out, err := m.sh(asNobody + bin + ` run --session z -- true`)
	if err == nil || !strings.Contains(out, "is the name of uid 0's session, whose journal is kept") {
		t.Errorf("uid 65534 registered z, whose journal is root's: %v\n%s", err, out)
	}
	out, err = m.sh(asNobody + bin + ` run --session y -- sh -c 'cat .rubino/self/info .rubino/self/denials.summary; ` + bin + ` denials'`)
	if err != nil {
		t.Fatalf("uid 65534's session y: %v\n%s", err, out)
	}
	for _, leak := range []string{"secret.txt", "echo x", `"owner": 0`, fmt.Sprintf(`"denials": %d`, 1)} {
		if strings.Contains(out, leak) {
			t.Errorf("uid 65534's new session y shows root's %q:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, `"owner": 65534`) {
		t.Errorf("uid 65534's session y is not its own:\n%s", out)
	}
	// Its own forgotten session's journal is still its: the log names it.
	if out, err := m.sh(asNobody + bin + ` changes --session n1`); err != nil || !strings.Contains(out, "pub/n1.txt") {
		t.Errorf("uid 65534's changes of its forgotten session n1: %v\n%s", err, out)
	}
	if out, err := m.sh(asNobody + bin + ` changes --session z`); err == nil || strings.Contains(out, "a.txt") {
		t.Errorf("uid 65534 reads root's forgotten session z's changes: %v\n%s", err, out)
	}
}

// TestTaskIDsPastJournaledTasks: task ids start at 1 at every mount, and
// a task's session is task-ID; the journal keeps an ended task's log for
// days. A mount whose journal has uid 65534's task-5 log gives its first
// task id 6: it neither goes on with that log nor is refused its name.
func TestTaskIDsPastJournaledTasks(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) {
		dir := filepath.Join(c.StateDir, "journal", "sessions")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		line := `{"seq":1,"time":"2026-01-01T00:00:00Z","op":"checkpoint","id":"cp000000","label":"session start","owner":65534}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, "task-5.jsonl"), []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if id := m.spawnSh("true"); id != "6" {
		t.Fatalf("the first task's id is %s, want 6 (past the journal's task-5)", id)
	}
}
