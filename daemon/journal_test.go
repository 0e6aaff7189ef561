package daemon

import (
	"testing"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/guard/ignore"
)

// TestJournalSharesGuardMatcher: the journal asks the guard's exemption
// matcher when the two would answer alike (no --exempt globs, git-ignored
// paths exempt from the guard), and its own otherwise; with
// journal.ignored it asks none.
func TestJournalSharesGuardMatcher(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		exempt               []string
		guardIgnored, jIgnor bool
		want                 string // "guard", "own" or "none"
	}{
		{"default", nil, false, false, "guard"},
		{"exempt globs", []string{"build/**"}, false, false, "own"},
		{"guard ignored", nil, true, false, "own"},
		{"journal ignored", nil, false, true, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			cfg := Config{Workspace: ws, StateDir: t.TempDir()}
			cfg.Journal = config.Journal{Enabled: true, MaxFileSize: 1 << 20}
			cfg.Exempt, cfg.GuardIgnored, cfg.Journal.Ignored = tc.exempt, tc.guardIgnored, tc.jIgnor
			d := &Daemon{cfg: cfg}
			guardM, err := ignore.New(ws, cfg.Exempt, cfg.GuardIgnored)
			if err != nil {
				t.Fatal(err)
			}
			j, m, err := d.openJournal(ws, guardM)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			got := "own"
			switch {
			case m == nil:
				got = "none"
			case m == guardM:
				got = "guard"
			}
			if got != tc.want {
				t.Fatalf("the journal's matcher is %s, want %s", got, tc.want)
			}
		})
	}
}
