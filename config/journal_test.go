package config

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/journal"
)

// TestJournalKeys: the [journal] section's defaults, a user file and
// flags set it, `config show` lists every key with its source, a bad
// value is an error naming the key, and a workspace file may not set it.
func TestJournalKeys(t *testing.T) {
	e := newEnv(t)
	c := e.mustLoad()
	want := Journal{Enabled: true, MaxFileSize: 64 << 20, Budget: 1 << 30, BudgetPerUID: 256 << 20, BudgetOtherUIDs: 512 << 20, Retention: 168 * time.Hour}
	if c.Journal != want {
		t.Fatalf("journal defaults: %+v, want %+v", c.Journal, want)
	}
	e.write(e.userFile(), "[journal]\nenabled = false\nignored = true\nmax_file_size = 1024\nbudget = 0\nbudget_per_uid = 0\nbudget_other_uids = 0\nretention = \"24h\"\n")
	c = e.mustLoad(Flag{Key: "journal.enabled", Name: "--journal", Value: true})
	want = Journal{Enabled: true, Ignored: true, MaxFileSize: 1024, Retention: 24 * time.Hour}
	if c.Journal != want {
		t.Fatalf("journal from the user file and --journal: %+v, want %+v", c.Journal, want)
	}
	var b bytes.Buffer
	if err := c.WriteTOML(&b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"[journal]", "enabled = true", "# from flag --journal", "max_file_size = 1024", `retention = "24h"`} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("config show lacks %q:\n%s", w, b.String())
		}
	}
	for file, msg := range map[string]string{
		"[journal]\nmax_file_size = 0\n":    ":2: journal.max_file_size: 0 out of range",
		"[journal]\nbudget = -1\n":          ":2: journal.budget: -1 out of range",
		"[journal]\nbudget_per_uid = -1\n":  ":2: journal.budget_per_uid: -1 out of range",
		"[journal]\nretention = \"soon\"\n": `:2: journal.retention: "soon" is not a duration`,
		"[journal]\nenabled = \"no\"\n":     ":2: journal.enabled: want a boolean",
	} {
		e := newEnv(t)
		e.write(e.userFile(), file)
		_, err := e.load()
		mustErr(t, err, e.userFile()+msg)
	}
	e = newEnv(t)
	e.write(e.wsFile(), "[journal]\nenabled = false\n")
	_, err := e.load()
	mustErr(t, err, "refusing the workspace file", ":2: journal.enabled may not be set in a workspace file: the journal is the user's record")
	e = newEnv(t)
	e.write(e.wsFile(), "[journal]\nbudget_per_uid = 1\n")
	_, err = e.load()
	mustErr(t, err, "refusing the workspace file", ":2: journal.budget_per_uid may not be set in a workspace file")
}

// TestJournalSyncKey: journal.sync defaults to write (the zero
// journal.SyncMode), a user file or --journal-sync sets fsync, `config
// show` lists it, another value is an error, and a workspace file may not
// set it.
func TestJournalSyncKey(t *testing.T) {
	e := newEnv(t)
	if c := e.mustLoad(); c.Journal.Sync != journal.SyncWrite {
		t.Fatalf("journal.sync default: %v", c.Journal.Sync)
	}
	e.write(e.userFile(), "[journal]\nsync = \"fsync\"\n")
	c := e.mustLoad()
	if c.Journal.Sync != journal.SyncFsync {
		t.Fatalf("journal.sync from the user file: %v", c.Journal.Sync)
	}
	var b bytes.Buffer
	if err := c.WriteTOML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `sync = "fsync"`) {
		t.Errorf("config show lacks journal.sync:\n%s", b.String())
	}
	if c := e.mustLoad(Flag{Key: "journal.sync", Name: "--journal-sync", Value: "write"}); c.Journal.Sync != journal.SyncWrite {
		t.Fatalf("--journal-sync write over the user file: %v", c.Journal.Sync)
	}
	e = newEnv(t)
	e.write(e.userFile(), "[journal]\nsync = \"always\"\n")
	_, err := e.load()
	mustErr(t, err, e.userFile()+":2: journal.sync")
	e = newEnv(t)
	e.write(e.wsFile(), "[journal]\nsync = \"write\"\n")
	_, err = e.load()
	mustErr(t, err, ":2: journal.sync may not be set in a workspace file")
}
