package sessionctl

import (
	"errors"
	"reflect"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/sessions"
)

// fakeRegistry is a Registry over fixed sessions; End records its calls.
type fakeRegistry struct {
	owners map[string]uint32
	ended  []string
}

func (r *fakeRegistry) RegisterFor(uint32, string, uint32, string, bool) error { return nil }
func (r *fakeRegistry) OwnerOf(name string) (uint32, bool) {
	uid, ok := r.owners[name]
	return uid, ok
}
func (r *fakeRegistry) End(name string) error         { r.ended = append(r.ended, name); return nil }
func (r *fakeRegistry) Rename(string, string) error   { return nil }
func (r *fakeRegistry) IsDescendant(_, _ uint32) bool { return false }
func (r *fakeRegistry) List() []sessions.Info {
	var out []sessions.Info
	for _, n := range []string{"a", "b"} {
		out = append(out, sessions.Info{Name: n, Owner: r.owners[n], Live: true})
	}
	return out
}

// fakeHost is a Host with no workspace and no other feature.
type fakeHost struct{ owners *Owners }

func (h fakeHost) MayActOn(c ctltree.Caller, s string) bool { return h.owners.MayActOn(c, s) }
func (h fakeHost) CallerRel(ctltree.Caller, string) (string, error) {
	return "", ctltree.Errorf(syscall.EPERM, "no mount")
}
func (h fakeHost) Owners() *Owners                                { return h.owners }
func (h fakeHost) SessionFeatures() []ctltree.SessionFeature      { return nil }
func (h fakeHost) GuardFiles(string) []ctltree.Entry              { return nil }
func (h fakeHost) LookupTarget(string) (guard.Target, error)      { return guard.Target{}, syscall.ENOENT }
func (h fakeHost) Readable(ctltree.Caller, string) *ctltree.Error { return nil }

// TestFeatureThroughHost drives the sessions feature through a fake host
// (docs/DESIGN.md#ctl-room): the listing and lookups of sessions/ follow
// Owners.MayActOn, and the end verb is refused (EPERM) on another uid's
// session and reaches the registry on the caller's own.
func TestFeatureThroughHost(t *testing.T) {
	reg := &fakeRegistry{owners: map[string]uint32{"a": 2000, "b": 3000}}
	feat := New(Config{Registry: reg, Guard: guard.New(guard.Config{})}, fakeHost{NewOwners(1000, reg)})
	entries := feat.CtlEntries()
	if len(entries) != 2 || entries[0].Name != "sessions" || entries[1].Name != "self" {
		t.Fatalf("entries %+v", entries)
	}
	dir := entries[0].Node.(*ctltree.Dir)
	u2 := ctltree.Caller{Uid: 2000, Session: "default-2000"}
	owner := ctltree.Caller{Uid: 1000, Session: sessions.Default, Privileged: true}
	if got, want := dir.List(u2), []string{"default-2000", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("uid 2000 lists %q, want %q", got, want)
	}
	if got, want := dir.List(owner), []string{sessions.Default, "a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the owner lists %q, want %q", got, want)
	}
	if dir.Child(u2, "b") != nil || dir.Child(u2, "a") == nil {
		t.Error("uid 2000 sees b or does not see a")
	}
	ctl := dir.Child(u2, "ctl").(*ctltree.File)
	var ce *ctltree.Error
	if err := ctl.Write(u2, []byte("end b")); !errors.As(err, &ce) || ce.Errno != syscall.EPERM {
		t.Errorf("end b by uid 2000: %v", err)
	}
	if err := ctl.Write(u2, []byte("end a")); err != nil || !reflect.DeepEqual(reg.ended, []string{"a"}) {
		t.Errorf("end a by uid 2000: %v, ended %q", err, reg.ended)
	}
}
