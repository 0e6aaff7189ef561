package tests

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/daemon"
)

// TestJournalSharePerUID: on an allow_other mount whose journal budget is
// 512 KiB, uid 65534 reads and removes its 64 KiB files until its share
// (256 KiB) is spent: its journal stops, its later removals still happen, and
// root's session, outside every session, still keeps the pre-image of the
// file it removes (docs/DESIGN.md#journal-share). Without the share uid
// 65534 spent the whole budget, which stops every session's journal,
// root's too.
func TestJournalSharePerUID(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		c.Journal.Budget = 512 << 10
		c.Journal.BudgetPerUID = 256 << 10
		c.Journal.BudgetOtherUIDs = 0 // this test is about one uid's share
		if err := os.Mkdir(filepath.Join(c.Workspace, "pub"), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(c.Workspace, "pub"), 0o777); err != nil {
			t.Fatal(err)
		}
		writeOwnedRandom(t, filepath.Join(c.Workspace, "pub"), 65534, 12)
		if err := os.WriteFile(filepath.Join(c.Workspace, "root.bin"), []byte(strings.Repeat("root's own bytes\n", 4096)), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	openUp(t, m.tmp)
	out, err := m.sh(asNobody + `sh -c 'for f in pub/*; do cat $f > /dev/null && rm $f || exit 1; done; echo done'`)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("uid 65534's writes and removals: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(m.backing("pub")); len(ents) != 0 {
		t.Fatalf("uid 65534's removals past its share did not happen: %d files left", len(ents))
	}
	kept, over := m.preImageCounts("default-65534")
	if kept != 3 || over != 9 {
		t.Errorf("uid 65534's 12 removals kept %d pre-images and %d over its share, want 3 and 9 (256 KiB of 64 KiB files and their records)", kept, over)
	}
	j, _ := m.status()["journal"].(map[string]any)
	if most, _ := j["most_by_one_uid"].(map[string]any); most["uid"] != float64(65534) {
		t.Errorf("status journal.most_by_one_uid = %v", j["most_by_one_uid"])
	}
	// Its records fill the share: then its journal stops.
	out, err = m.sh(asNobody + `sh -c 'for i in $(seq 1000); do : > pub/n$i || exit 1; done; echo done'`)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("uid 65534's creates: %v\n%s", err, out)
	}
	j, _ = m.status()["journal"].(map[string]any)
	stopped, _ := j["stopped"].(map[string]any)
	if why, _ := stopped["default-65534"].(string); !strings.Contains(why, "uid 65534's share of the journal budget, 262144 bytes, is spent") {
		t.Fatalf("uid 65534's journal is not stopped by its share: status journal = %v", j)
	}
	if _, ok := j["last_error"]; !ok {
		t.Errorf("root's status has no journal.last_error: %v", j)
	}
	// uid 65534 sees its own stopped session, and no reason that may
	// name another session's path.
	var theirs map[string]any
	if err := json.Unmarshal([]byte(m.mustSh(asNobody+"cat .rubino/status")), &theirs); err != nil {
		t.Fatal(err)
	}
	tj, _ := theirs["journal"].(map[string]any)
	if ts, _ := tj["stopped"].(map[string]any); ts["default-65534"] == nil || tj["last_error"] != nil {
		t.Errorf("uid 65534's status journal = %v", tj)
	}
	m.mustSh("cat root.bin > /dev/null && rm root.bin")
	j, _ = m.status()["journal"].(map[string]any)
	stopped, _ = j["stopped"].(map[string]any)
	if why, ok := stopped["default"]; ok {
		t.Fatalf("root's journal stopped after uid 65534's changes: %v", why)
	}
	if pre := m.preImageOf("default", "root.bin"); pre == "" || strings.HasPrefix(pre, "unrecoverable") {
		t.Fatalf("root's removal of root.bin kept no pre-image: %q", pre)
	}
	if got := m.mustSh(shq(sharedBin(t)) + ` rewind --session default --to cp000000 root.bin >/dev/null && head -c 17 root.bin`); got != "root's own bytes\n" {
		t.Errorf("root.bin rewound to %q", got)
	}
}

// TestJournalShareOtherUIDs: uids 65534 and 65533, each under its own
// share (256 KiB), together pass the share of all uids but the owner's
// (384 KiB): their later pre-images are unrecoverable, and root's
// removal still keeps its pre-image. Without that bound two uids spent
// what one may not.
func TestJournalShareOtherUIDs(t *testing.T) {
	m := newMount(t, nil, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		c.Journal.Budget = 1 << 20
		c.Journal.BudgetPerUID = 256 << 10
		c.Journal.BudgetOtherUIDs = 384 << 10
		for _, uid := range []int{65534, 65533} {
			dir := filepath.Join(c.Workspace, fmt.Sprint("u", uid))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, uid, uid); err != nil {
				t.Fatal(err)
			}
			writeOwnedRandom(t, dir, uid, 4)
		}
		if err := os.WriteFile(filepath.Join(c.Workspace, "root.bin"), []byte(strings.Repeat("root's own bytes\n", 4096)), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	openUp(t, m.tmp)
	kept, over := 0, 0
	for _, uid := range []int{65534, 65533} {
		as := fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups ", uid, uid)
		out, err := m.sh(as + fmt.Sprintf(`sh -c 'for f in u%d/*; do cat $f > /dev/null && rm $f || exit 1; done; echo done'`, uid))
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("uid %d's removals: %v\n%s", uid, err, out)
		}
		k, o := m.preImageCounts(fmt.Sprintf("default-%d", uid))
		kept, over = kept+k, over+o
	}
	if kept != 5 || over != 3 {
		t.Errorf("the two uids' 8 removals kept %d pre-images and %d over their shares, want 5 and 3 (384 KiB of 64 KiB files and their records)", kept, over)
	}
	j, _ := m.status()["journal"].(map[string]any)
	if got, _ := j["other_uids_bytes"].(float64); got > 384<<10 || got < 320<<10 {
		t.Errorf("status journal.other_uids_bytes = %v", j["other_uids_bytes"])
	}
	m.mustSh("cat root.bin > /dev/null && rm root.bin")
	if pre := m.preImageOf("default", "root.bin"); pre == "" || strings.HasPrefix(pre, "unrecoverable") {
		t.Fatalf("root's removal of root.bin kept no pre-image: %q", pre)
	}
}

// writeOwnedRandom writes n files f0..f(n-1) of 64 KiB in dir, each of
// random bytes of its own (so no pre-image is another's duplicate), owned
// by uid (gid the same).
func writeOwnedRandom(t *testing.T, dir string, uid, n int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		b := make([]byte, 64<<10)
		rand.Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

// preImageCounts counts the pre-images session's journal kept bytes of
// and those over a budget or share ("unrecoverable: over budget").
func (m *mount) preImageCounts(session string) (kept, over int) {
	for _, r := range m.journalRecords(session) {
		for _, p := range r.Pre {
			switch {
			case p.Blob != "":
				kept++
			case strings.Contains(p.Unrecoverable, "over budget"):
				over++
			}
		}
	}
	return kept, over
}

// preImageOf returns the blob address, or the unrecoverable reason, of
// the last pre-image of path in session's journal ("" when none).
func (m *mount) preImageOf(session, path string) string {
	var pre string
	for _, r := range m.journalRecords(session) {
		for _, p := range r.Pre {
			if p.Path == path {
				pre = p.Blob + p.Unrecoverable
			}
		}
	}
	return pre
}
