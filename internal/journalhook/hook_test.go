package journalhook

import "testing"

// TestJournalsExclusions: which paths are journaled.
func TestJournalsExclusions(t *testing.T) {
	h := &Hook{} // Journals reads no journal
	for rel, want := range map[string]bool{
		"a": true, "a/b.go": true, ".gitignore": true, ".github/x": true,
		".git": false, ".git/index": false, "sub/.git/HEAD": false, ".rubino": false, ".rubino/x": false, "": false,
		// go-fuse's placeholder of a nameless node, and workspace names
		// that only look like it.
		".go-fuse.12/deleted": false, ".go-fuse.12/deleted/x": false,
		".go-fuse.x": true, ".go-fuse.12": true, ".go-fuse./deleted": true, ".go-fuse.12/deletedx": true, "a/.go-fuse.1/deleted": true,
	} {
		if got := h.Journals(rel, false); got != want {
			t.Errorf("journals(%q) = %v, want %v", rel, got, want)
		}
	}
}
