package tests

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// denials returns the parsed .rubino/guard/denials of a mount.
func (m *mount) denials() []map[string]any {
	m.t.Helper()
	b, err := os.ReadFile(m.path(".rubino/guard/denials"))
	if err != nil {
		m.t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			m.t.Fatalf("denial line %q: %v", line, err)
		}
		out = append(out, d)
	}
	return out
}

// TestGuardRealTools runs a table of real tools through a real mount
// (docs/DESIGN.md#guarded-ops): every blind mutation of an unread file is
// refused with the file intact; after `cat` the same mutation is allowed.
func TestGuardRealTools(t *testing.T) {
	const orig = "original content\n"
	cases := []struct {
		name   string
		script string // mutates f; a and b are other files
		after  func(t *testing.T, m *mount)
	}{
		{"echo-redirect", "echo blind > f", nil},
		{"cp", "cp a f", nil},
		{"mv", "mv a f", nil},
		{"truncate", "truncate -s0 f", nil},
		{"rm", "rm f", nil},
		{"append", "echo more >> f", nil},
		{"dd-notrunc", "printf XX | dd of=f conv=notrunc status=none", nil},
		{"python-rdwr", `python3 -c "import os; fd=os.open('f', os.O_RDWR); os.write(fd, b'ZZ')"`, nil},
	}
	files := map[string]string{}
	for _, c := range cases {
		files["unread/"+c.name+"/f"] = orig
		files["unread/"+c.name+"/a"] = "other\n"
		files["read/"+c.name+"/f"] = orig
		files["read/"+c.name+"/a"] = "other\n"
	}
	m := newMount(t, files, nil)
	for _, c := range cases {
		t.Run("unread/"+c.name, func(t *testing.T) {
			dir := "unread/" + c.name
			out, err := m.shIn(dir, c.script)
			if err == nil {
				t.Fatalf("%s on an unread file succeeded:\n%s", c.script, out)
			}
			if got := m.readBacking(dir + "/f"); got != orig {
				t.Fatalf("refused %s changed the file: %q", c.script, got)
			}
			if _, err := os.Stat(m.backing(dir + "/a")); err != nil {
				t.Fatalf("refused %s lost the source: %v", c.script, err)
			}
		})
		t.Run("read/"+c.name, func(t *testing.T) {
			dir := "read/" + c.name
			if out, err := m.shIn(dir, "cat f >/dev/null && "+c.script); err != nil {
				t.Fatalf("%s after cat: %v\n%s", c.script, err, out)
			}
		})
	}
	// Every refusal is logged with its code, and `why` explains the last.
	ds := m.denials()
	if len(ds) != len(cases) {
		t.Errorf("denials: got %d, want %d: %v", len(ds), len(cases), ds)
	}
	for _, d := range ds {
		if d["code"] != "unread" || d["session"] != "default" || d["message"] == "" {
			t.Errorf("denial %v: want code unread, session default and a message", d)
		}
	}
	why, err := os.ReadFile(m.path(".rubino/guard/why"))
	if err != nil || !strings.Contains(string(why), "read it first") {
		t.Errorf("guard/why = %q, %v", why, err)
	}
}

// TestGuardEditPatterns covers sed -i, an atomic save, new files, aliases,
// external edits (stale) and touch (still fresh).
func TestGuardEditPatterns(t *testing.T) {
	m := newMount(t, map[string]string{
		"sed.txt":     "hello world\n",
		"atomic.txt":  "v1\n",
		"stale.txt":   "before\n",
		"touched.txt": "same bytes\n",
		"hard.txt":    "hard\n",
		"sym.txt":     "sym\n",
		"unread.txt":  "unread\n",
		".gitignore":  "build/\n*.log\n",
		"build/out":   "old build output\n",
		"app.log":     "old log\n",
	}, nil)

	t.Run("sed -i after read", func(t *testing.T) {
		m.mustSh("cat sed.txt >/dev/null && sed -i s/world/agent/ sed.txt")
		if got := m.readBacking("sed.txt"); got != "hello agent\n" {
			t.Fatalf("sed result %q", got)
		}
		// The session's own write is authoritative: a second edit passes.
		m.mustSh("sed -i s/agent/again/ sed.txt")
	})
	t.Run("sed -i reads what it rewrites", func(t *testing.T) {
		// sed -i opens and reads the file itself before renaming its
		// rewrite over it: a read, then a write, not a blind overwrite.
		before := len(m.denials())
		m.mustSh("sed -i s/unread/edited/ unread.txt")
		if got := m.readBacking("unread.txt"); got != "edited\n" {
			t.Fatalf("sed result %q", got)
		}
		if after := len(m.denials()); after != before {
			t.Fatalf("sed -i logged %d denials", after-before)
		}
	})
	t.Run("atomic save", func(t *testing.T) {
		m.mustSh("cat atomic.txt >/dev/null && printf 'v2\\n' > .atomic.tmp && mv .atomic.tmp atomic.txt")
		m.mustSh("printf 'v3\\n' > .atomic.tmp && mv .atomic.tmp atomic.txt")
		if got := m.readBacking("atomic.txt"); got != "v3\n" {
			t.Fatalf("atomic save result %q", got)
		}
	})
	t.Run("new file", func(t *testing.T) {
		m.mustSh("echo new > brand-new.txt && echo again > brand-new.txt && mkdir -p d/e && echo x > d/e/f")
	})
	t.Run("ignored paths are exempt", func(t *testing.T) {
		m.mustSh("echo y > build/out && echo y > app.log")
	})
	t.Run("stale after external edit", func(t *testing.T) {
		m.mustSh("cat stale.txt >/dev/null")
		m.writeBacking("stale.txt", "changed outside\n")
		m.mustFail("echo mine > stale.txt")
		if got := m.readBacking("stale.txt"); got != "changed outside\n" {
			t.Fatalf("refused write changed the file: %q", got)
		}
		ds := m.denials()
		if last := ds[len(ds)-1]; last["code"] != "stale" {
			t.Fatalf("last denial %v, want code stale", last)
		}
		m.mustSh("cat stale.txt >/dev/null && echo mine > stale.txt")
	})
	t.Run("touch keeps fresh", func(t *testing.T) {
		m.mustSh("cat touched.txt >/dev/null && touch touched.txt && touch -d '2001-01-01' touched.txt")
		if err := os.Chtimes(m.backing("touched.txt"), time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
		m.mustSh("echo edited > touched.txt")
	})
	t.Run("hard link alias", func(t *testing.T) {
		m.mustSh("ln hard.txt hard-alias.txt")
		m.mustFail("echo x > hard-alias.txt")
		m.mustSh("cat hard.txt >/dev/null && echo x > hard-alias.txt")
		if got := m.readBacking("hard.txt"); got != "x\n" {
			t.Fatalf("hard link write: %q", got)
		}
	})
	t.Run("symlink alias", func(t *testing.T) {
		m.mustSh("ln -s sym.txt sym-alias.txt")
		m.mustFail("echo x > sym-alias.txt")
		m.mustSh("cat sym-alias.txt >/dev/null && echo x > sym.txt")
	})
}
