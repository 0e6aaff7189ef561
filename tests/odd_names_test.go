package tests

import (
	"os"
	"strings"
	"testing"
)

// TestOddNamesRewindAndDenials: a Linux name is any bytes but '/' and
// NUL. A file whose name is not valid UTF-8, removed through the mount,
// comes back under its own name at a rewind, and one made is removed
// again; the journal's JSON log once kept each bad byte as U+FFFD, so the
// rewind made a file of another name and left the made one. A refusal of
// a name with a newline is one line of `rubinofs denials`, and the name
// is quoted in `--summary`, and a read record's in tracked: it cannot
// print a line of its own.
func TestOddNamesRewindAndDenials(t *testing.T) {
	const gone, made, nl = "bad\xff\xfename", "new\xfe", "evil\nDENIED fake.go"
	m := newMount(t, map[string]string{gone: "old bytes\n", nl: "orig\n"}, nil)
	bin := shq(sharedBin(t))
	m.mustSh("cat " + shq(gone) + " > /dev/null && rm " + shq(gone) + " && echo new > " + shq(made))
	out := m.mustSh(bin + " rewind --to cp000000")
	if got, err := os.ReadFile(m.backing(gone)); string(got) != "old bytes\n" {
		t.Errorf("the rewind gave back %q (%v) under the removed file's name\n%s", got, err, out)
	}
	if _, err := os.Lstat(m.backing(made)); err == nil {
		t.Errorf("the rewind left the made file\n%s", out)
	}
	ents, _ := os.ReadDir(m.ws)
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("after the rewind the workspace holds %q, want the two files it began with", names)
	}

	if _, err := m.sh("echo x > " + shq(nl)); err == nil {
		t.Fatal("a blind overwrite was allowed")
	}
	if out := m.mustSh("cat .rubino/guard/why"); strings.Count(out, "\n") != 1 || !strings.Contains(out, `evil\nDENIED fake.go`) {
		t.Errorf("guard/why is not one line:\n%s", out)
	}
	out = m.mustSh(bin + " denials")
	if strings.Contains(out, "\nDENIED") || !strings.Contains(out, `refusing to overwrite evil\nDENIED fake.go: read it first`) {
		t.Errorf("rubinofs denials printed the name's newline:\n%s", out)
	}
	out = m.mustSh(bin + " denials --summary")
	if strings.Contains(out, "\nDENIED") || !strings.Contains(out, `"evil\nDENIED fake.go"`) {
		t.Errorf("rubinofs denials --summary printed the name's newline:\n%s", out)
	}

	// A read record's path is one field of one line of tracked: a name
	// with a newline and tabs cannot forge a record of another file.
	const forged = "x\nfresh\tdeadbeef\tvictim.go"
	m.writeBacking(forged, "f\n")
	m.mustSh("cat " + shq(forged) + " > /dev/null")
	out = m.mustSh("cat .rubino/self/tracked")
	if strings.Contains(out, "\nfresh\tdeadbeef\tvictim.go") || !strings.Contains(out, `"x\nfresh\tdeadbeef\tvictim.go"`) {
		t.Errorf("tracked lets a name forge a line:\n%s", out)
	}
}
