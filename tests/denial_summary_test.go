package tests

// The denial log counts every refusal and keeps a per-session summary by
// (path, code), so one loud command never pushes every earlier refusal out
// (docs/DESIGN.md#denial-summary).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDenialSummaryKeepsEarly: a session is refused one write of a, then a
// loop in the same session is refused 3,000 writes of other files. The
// log's 1,000 lines have lost a; the summary still lists a with count 1
// (the loop's files past 1,000 entries counted as other), status and the
// session's info count 3,001, `rubinofs denials --summary` shows it, and
// another uid sees none of it. Before the summary the log was all there
// was, and a was gone from it.
func TestDenialSummaryKeepsEarly(t *testing.T) {
	const loud = 3000
	files := map[string]string{"a": "a\n"}
	for i := 1; i <= loud; i++ {
		files[fmt.Sprintf("loud/f%d", i)] = "x\n"
	}
	m := newSharedMount(t, files)
	s := m.startAgent("noisy")
	s.refused("echo x > a")
	s.refused(fmt.Sprintf("i=1; while [ $i -le %d ]; do echo x > loud/f$i; i=$((i+1)); done; false", loud))

	counts, _ := m.status()["counts"].(map[string]any)
	if got, _ := counts["denials"].(float64); got != loud+1 {
		t.Errorf("status counts.denials = %v, want %d", counts["denials"], loud+1)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(m.mustSh("cat .rubino/sessions/noisy/info")), &info); err != nil {
		t.Fatal(err)
	}
	if got, _ := info["denials"].(float64); got != loud+1 {
		t.Errorf("sessions/noisy/info denials = %v, want %d", info["denials"], loud+1)
	}
	log := m.denials()
	if len(log) != 1000 {
		t.Errorf("the log holds %d lines, want the newest 1000", len(log))
	}
	for _, d := range log {
		if d["path"] == "a" {
			t.Errorf("a is still in the log: the test proves nothing")
		}
	}

	raw := m.mustSh("cat .rubino/sessions/noisy/denials.summary")
	var sum struct {
		Session  string
		Denials  int
		Warnings int
		Other    int
		Entries  []struct {
			Path  string
			Code  string
			Count int
		}
	}
	if err := json.Unmarshal([]byte(raw), &sum); err != nil {
		t.Fatalf("summary %q: %v", raw, err)
	}
	foundA := false
	for _, e := range sum.Entries {
		if e.Path == "a" {
			foundA = e.Code == "unread" && e.Count == 1
		}
	}
	if !foundA || sum.Session != "noisy" || sum.Denials != loud+1 || len(sum.Entries) != 1000 || sum.Other != loud+1-1000 {
		t.Errorf("summary: session %s, %d denials, %d entries, other %d, a listed as unread once: %v; want noisy, %d, 1000, %d, true",
			sum.Session, sum.Denials, len(sum.Entries), sum.Other, foundA, loud+1, loud+1-1000)
	}
	if all := m.mustSh("cat .rubino/guard/denials.summary"); !strings.Contains(all, `"session":"noisy"`) {
		t.Errorf("guard/denials.summary for the mount's owner lacks noisy: %.200s", all)
	}

	out, err := cli(t, m.tmp, "denials", "--summary", "--session", "noisy", "--mount", m.mnt)
	if err != nil {
		t.Fatalf("rubinofs denials --summary: %v\n%s", err, out)
	}
	if !strings.Contains(out, "session noisy: 3001 refused; 2001 not listed") || !regexp.MustCompile(`(?m)^ +1  unread +a$`).MatchString(out) {
		t.Errorf("rubinofs denials --summary:\n%.600s", out)
	}

	// Another uid sees no line of the owner's session.
	if out, err := m.nobody(`cat "$MNT/.rubino/guard/denials.summary"`); err != nil || strings.Contains(out, "noisy") {
		t.Errorf("uid 65534 reads guard/denials.summary: %v %.200q", err, out)
	}
	if out, err := m.nobody(`cat "$MNT/.rubino/sessions/noisy/denials.summary"`); err == nil {
		t.Errorf("uid 65534 reads noisy's summary: %.200q", out)
	}
}

// TestDenialsFollow: `rubinofs denials --all --follow` prints each refusal
// as it is logged, once, and keeps running (tail -f cannot follow a control
// file, whose size is 0); --follow with --summary is a usage error.
func TestDenialsFollow(t *testing.T) {
	m := newMount(t, map[string]string{"a": "a\n", "b": "b\n"}, nil)
	if out, code := cliCode(t, m.tmp, "denials", "--summary", "--follow", "--mount", m.mnt); code != 2 {
		t.Errorf("denials --summary --follow: exit %d, want 2 (usage)\n%s", code, out)
	}
	cmd := cliCommand(t, m.tmp, nil, "denials", "--all", "--follow", "--mount", m.mnt)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	failsafe := time.NewTimer(cliFailsafe)
	defer failsafe.Stop()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("denials --follow ended")
			}
			return l
		case <-failsafe.C:
			t.Fatalf("denials --follow printed nothing new within %v", cliFailsafe)
		}
		return ""
	}
	for _, name := range []string{"a", "b"} {
		if err := os.WriteFile(m.path(name), []byte("blind\n"), 0o644); err == nil {
			t.Fatalf("a blind overwrite of %s was allowed", name)
		}
		// The previous refusal is not printed again: the next line is this one.
		if l := next(); !strings.Contains(l, "refusing to overwrite "+name+": read it first") {
			t.Fatalf("denials --follow printed %q, want the refusal of %s", l, name)
		}
	}
}
