package ctlfs

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// fakeHost is a mount for the room without FUSE: callers see sessions
// named in may, and every session has the records in tracked.
type fakeHost struct {
	may     map[string]bool
	tracked []guard.TrackedRecord
}

func (h fakeHost) MayActOn(_ ctltree.Caller, s string) bool { return h.may[s] }
func (h fakeHost) CallerRel(ctltree.Caller, string) (string, error) {
	return "", ctltree.Errorf(syscall.EPERM, "no paths here")
}
func (h fakeHost) Caller(context.Context) ctltree.Caller { return ctltree.Caller{Session: "a"} }
func (h fakeHost) Admin(ctltree.Caller) bool             { return false }
func (h fakeHost) Tracked(ctltree.Caller, string) []guard.TrackedRecord {
	return h.tracked
}
func (h fakeHost) Quiet(context.Context) {}

// feat is a plugged feature with a file, a status key and a file in every
// session's directory.
type feat struct{}

func (feat) CtlEntries() []ctltree.Entry {
	return []ctltree.Entry{{Name: "feat", Node: ctltree.Static("hi\n")}}
}
func (feat) Status() (string, any) { return "feat", 7 }
func (feat) SessionEntries(string) []ctltree.Entry {
	return []ctltree.Entry{{Name: "journal", Node: ctltree.Static("")}}
}
func (feat) KeepsSession(string) bool { return false }
func (feat) SessionCtl(ctltree.Caller, string, []byte) (bool, error) {
	return false, nil
}

func read(t *testing.T, tr *Tree, c ctltree.Caller, path ...string) string {
	t.Helper()
	f, ok := tr.resolve(c, path).(*ctltree.File)
	if !ok {
		t.Fatalf("%v is not a file", path)
	}
	b, err := f.Read(context.Background(), c)
	if err != nil {
		t.Fatalf("read %v: %v", path, err)
	}
	return string(b)
}

// The room runs over any host: its base files and a plugged feature's
// appear in order, status carries the feature's key, errors shows only
// the sessions the host lets the reader see, and guard/tracked renders
// the host's (masked) records.
func TestTreeOverAFakeHost(t *testing.T) {
	host := fakeHost{may: map[string]bool{"a": true},
		tracked: []guard.TrackedRecord{{Path: "f", State: "fresh", Hash: "-"}}}
	tr := New(Config{Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}), Started: time.Now(), Version: "v"}, host)
	tr.Plug(feat{})
	c := ctltree.Caller{Session: "a"}

	names := tr.root.Names(c)
	if got := strings.Join(names, " "); got != "README status errors guard feat" {
		t.Fatalf("root lists %q", got)
	}
	if len(tr.SessionFeatures()) != 1 || len(tr.GuardFiles("a")) != 4 {
		t.Fatalf("session features %d, guard entries %d", len(tr.SessionFeatures()), len(tr.GuardFiles("a")))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(read(t, tr, c, "status")), &doc); err != nil || doc["feat"] != 7.0 || doc["version"] != "v" {
		t.Fatalf("status %v (%v)", doc, err)
	}
	tr.recordError(ctltree.Caller{Session: "a"}, []string{"x"}, syscall.EINVAL, "mine")
	tr.recordError(ctltree.Caller{Session: "b"}, []string{"x"}, syscall.EPERM, "theirs")
	if errs := read(t, tr, c, "errors"); !strings.Contains(errs, `"mine"`) || strings.Contains(errs, "theirs") {
		t.Fatalf("errors %q", errs)
	}
	if got := read(t, tr, c, "guard", "tracked"); got != "fresh\t-\tf\n" {
		t.Fatalf("tracked %q", got)
	}
}
