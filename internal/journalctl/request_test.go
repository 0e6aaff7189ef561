package journalctl

import "testing"

// TestSplitRequest: tokens and Go-quoted tokens of a journal request.
func TestSplitRequest(t *testing.T) {
	got, err := splitRequest(`--since cp000001 -- "a b" c`)
	if err != nil || len(got) != 5 || got[3] != "a b" || got[4] != "c" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := splitRequest(`"unterminated`); err == nil {
		t.Fatal("a malformed quoted token was accepted")
	}
	if _, err := parseArgs("diff", []string{"--bogus"}, "--since", "--"); err == nil {
		t.Fatal("an unknown option was accepted")
	}
	a, err := parseArgs("rewind", []string{"--to", "cp000000", "--dry-run", "--", "x"}, "--to", "--force", "--dry-run", "--")
	if err != nil || a.to != "cp000000" || !a.dryRun || a.force || len(a.paths) != 1 {
		t.Fatalf("%+v, %v", a, err)
	}
}
