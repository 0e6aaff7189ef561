package tests

import (
	"testing"
)

// TestOwnRecordsBoundedThroughMount: a process that creates and removes
// 12,000 files at paths of 3.8 KB through the mount, faster than the
// watcher's own-change records expire, leaves the records within their
// bound (docs/DESIGN.md#own-records-bound: about 36 MiB, where the removed
// names alone are 46 MB), counts the records dropped early in the status
// file, and costs no one a refusal: a file read before the flood is
// appended to through one handle twice after it.
func TestOwnRecordsBoundedThroughMount(t *testing.T) {
	m := newMount(t, map[string]string{"notes.txt": "one\n"}, nil)
	m.mustSh("cat notes.txt >/dev/null")
	m.mustSh(`python3 - <<'PY'
import os
base = os.path.join("flood", *(["d" * 240] * 14))
os.makedirs(base)
names = [os.path.join(base, "f%05d_%s" % (i, "x" * 200)) for i in range(12000)]
for n in names:
    with open(n, "w") as f:
        f.write("y")
for n in names:
    os.unlink(n)
PY`)
	w, _ := m.status()["watcher"].(map[string]any)
	held, _ := w["own_records_bytes"].(float64)
	dropped, _ := w["own_records_dropped"].(float64)
	t.Logf("own records: %.0f bytes held, %.0f dropped early", held, dropped)
	const bound = 2*16<<20 + 4<<20 + 64<<10
	if held > bound {
		t.Errorf("the own-change records hold %.0f bytes, past their bound of %d", held, bound)
	}
	if dropped == 0 {
		t.Error("no own-change record counted as dropped early")
	}
	m.mustSh(`python3 -c "f=open('notes.txt','a'); f.write('two\n'); f.flush(); f.write('three\n'); f.close()"`)
	if got := m.readBacking("notes.txt"); got != "one\ntwo\nthree\n" {
		t.Errorf("notes.txt holds %q after the appends", got)
	}
}
