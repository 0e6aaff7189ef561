package tests

import (
	"strings"
	"testing"
)

// TestWritersAttribution: writes are attributed to the writer's session,
// not to its process or its handle (docs/DESIGN.md#own-write-refresh).
// Two processes of one session, each
// with its own read-write handle of a file the session read, take turns
// writing it (write(2), splice and stores through a shared writable
// mapping) and are never refused; two processes of two sessions doing the
// same make each other stale at every turn: the second writer is refused
// until it reads the file again. Both with cached handles and with every
// handle a passthrough one (a reader holds the file open first:
// docs/DESIGN.md#passthrough-io-modes).
func TestWritersAttribution(t *testing.T) {
	m := newMount(t, map[string]string{"f": "v1v1v1v1", "g": "v1v1v1v1", "pf": "v1v1v1v1", "pg": "v1v1v1v1"}, nil)
	one, c := m.startAgent("one"), m.startAgent("c")
	b := one // the first of the two sessions
	// A reader holds pf and pg open first: every later handle of them is a
	// passthrough one.
	startHolderAs(t, m, one, "reader-f", "pf").want("ok ", "open f r")
	startHolderAs(t, m, one, "reader-g", "pg").want("ok ", "open g r")
	for _, mode := range []struct{ name, f, g string }{{"cached", "f", "g"}, {"passthrough", "pf", "pg"}} {
		f, g := mode.f, mode.g
		// One session, two processes, each with its own handle of f.
		denied := len(m.denials())
		one.ok("cat " + f + " >/dev/null")
		p1, p2 := startHolderAs(t, m, one, "one-1-"+f, f), startHolderAs(t, m, one, "one-2-"+f, f)
		p1.want("ok ", "open f rw")
		p2.want("ok ", "open f rw")
		steps := []struct {
			h       *holder
			op, val string
		}{
			{p1, "pwrite", "aa"}, {p2, "pwrite", "bb"}, {p1, "pwrite", "cc"}, {p2, "splice", "dd"},
			{p1, "mstore", "ee"}, {p2, "pwrite", "ff"}, {p2, "mstore", "gg"}, {p1, "pwrite", "hh"},
		}
		for i, step := range steps {
			if step.op == "mstore" && mode.name == "passthrough" {
				// Stores through a passthrough mapping reach the backing
				// file unseen, and the watcher may take them for an
				// outside edit (docs/DESIGN.md#passthrough-mmap-credit).
				continue
			}
			if got := step.h.do("%s f %s", step.op, step.val); got != "ok " {
				t.Fatalf("%s step %d: %s of one session: %s %s: %q, want allowed", mode.name, i, step.h.who, step.op, step.val, got)
			}
			if got := m.readBacking(f); !strings.HasPrefix(got, step.val) {
				t.Fatalf("%s step %d: %s is %q after %s %s", mode.name, i, f, got, step.op, step.val)
			}
		}
		p1.want("ok ", "close f")
		p2.want("ok ", "close f")
		for _, d := range m.denials()[denied:] {
			t.Errorf("%s: refused in one session: %v", mode.name, d)
		}

		// Two sessions, one process each, on g.
		b.ok("cat " + g + " >/dev/null")
		c.ok("cat " + g + " >/dev/null")
		hb, hc := startHolderAs(t, m, b, "b-"+g, g), startHolderAs(t, m, c, "c-"+g, g)
		hb.want("ok ", "open g rw")
		hc.want("ok ", "open g rw")
		before := len(m.denials())
		hb.want("ok ", "pwrite g bb")
		hc.want("err EACCES", "pwrite g cc") // b changed g since c read it
		hc.want("err EACCES", "splice g cc")
		hc.want("ok bbv1v1v1", "pread g") // c reads b's change: its read counts
		hc.want("ok ", "pwrite g cc")
		hb.want("err EACCES", "pwrite g dd") // c changed g since b read it
		hb.want("err EACCES", "splice g dd")
		if got := m.readBacking(g); got != "ccv1v1v1" {
			t.Fatalf("%s is %q, want c's write alone", g, got)
		}
		hb.want("ok ", "close g")
		hc.want("ok ", "close g")
		ds := m.denials()[before:]
		if len(ds) != 4 {
			t.Errorf("%s: %d refusals in the denial log, want 4", mode.name, len(ds))
		}
		for _, d := range ds {
			if d["code"] != "stale" {
				t.Errorf("%s: refusal %v, want stale", mode.name, d)
			}
		}
	}
}
