package sessions

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidSessionName: an accepted session name is one path element that
// stays where it is put (never "", ".", "..", never with '/', NUL, white
// space or a non-ASCII byte), at most MaxName bytes, not
// Default; a refused one has a readable, bounded reason. Seeds are in
// testdata/fuzz/FuzzValidSessionName; search further with
// `go test -run='^$' -fuzz='^FuzzValidSessionName$' -fuzztime=25s ./guard`.
func FuzzValidSessionName(f *testing.F) {
	for _, s := range []string{
		"agent-a", "a", "A.b_c-9", "default", "", ".", "..", "../x", "/etc", "a/b", "a\nb", "a\x00b", " a",
		"-a", ".hidden", "é", "\xff", strings.Repeat("a", 64), strings.Repeat("a", 65), "task-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidName(name)
		if err != nil {
			if msg := err.Error(); msg == "" || !utf8.ValidString(msg) || len(msg) > 300 {
				t.Fatalf("reason %q", msg)
			}
			return
		}
		if name == Default || name == "" || name == "." || name == ".." || len(name) > MaxName {
			t.Fatalf("accepted %q", name)
		}
		if filepath.Base(name) != name || filepath.Clean("/x/"+name) != "/x/"+name {
			t.Fatalf("accepted %q, which is not one path element", name)
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; c <= ' ' || c >= 0x7f || c == '/' {
				t.Fatalf("accepted %q with byte %#x", name, c)
			}
		}
	})
}
