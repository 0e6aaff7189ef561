package fusefs

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/guard"
)

// TestOpenByNodeWhileAnotherNameIsUnlinked replays, step by step, an
// UNLINK of one hard link racing an OPEN of the file by another: the
// backing name "a" is gone while go-fuse's tree still records it as the
// node's newest name (the bridge updates the tree after the handler
// returns). The open must not fail with ENOENT: it waits for the name
// change under way and opens the file by "b", which existed all along.
func TestOpenByNodeWhileAnotherNameIsUnlinked(t *testing.T) {
	for _, mode := range []guard.Mode{guard.ModeOff, guard.ModeEnforce} {
		t.Run(mode.String(), func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "b"), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(ws, "b"), filepath.Join(ws, "a")); err != nil {
				t.Fatal(err)
			}
			f, err := New(Config{Workspace: ws, Guard: guard.New(guard.Config{Mode: mode}),
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			sec := time.Second
			raw := fs.NewNodeFS(f.Root(), &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec})
			raw.Init(nil)
			cancel := make(chan struct{})
			var eb, ea fuse.EntryOut
			// "b" first, then "a": the tree's newest name of the node is "a".
			for _, l := range []struct {
				name string
				out  *fuse.EntryOut
			}{{"b", &eb}, {"a", &ea}} {
				if st := raw.Lookup(cancel, &fuse.InHeader{NodeId: 1}, l.name, l.out); !st.Ok() {
					t.Fatalf("lookup %s: %v", l.name, st)
				}
			}
			if eb.NodeId != ea.NodeId {
				t.Fatalf("hard links are nodes %d and %d, want one", eb.NodeId, ea.NodeId)
			}

			// The UNLINK of "a": its handler has removed the backing
			// name, the bridge has not updated its tree yet.
			done := f.names.changing()
			if err := os.Remove(filepath.Join(ws, "a")); err != nil {
				t.Fatal(err)
			}
			res := make(chan fuse.Status, 1)
			go func() {
				var oo fuse.OpenOut
				st := raw.Open(cancel, &fuse.OpenIn{InHeader: hdr(eb.NodeId), Flags: syscall.O_WRONLY}, &oo)
				if st.Ok() {
					raw.Release(cancel, &fuse.ReleaseIn{InHeader: hdr(eb.NodeId), Fh: oo.Fh})
				}
				res <- st
			}()
			// Wait until the open, refused by "a", waits for the name
			// change (a writer is pending on nameChanges).
			for f.names.mu.TryRLock() {
				f.names.mu.RUnlock()
				select {
				case st := <-res:
					done(true)
					t.Fatalf("open by node returned %v while another name's unlink was under way, want it to wait and succeed", st)
				default:
					runtime.Gosched()
				}
			}
			f.root.EmbeddedInode().RmChild("a") // the bridge's tree update
			done(true)
			if st := <-res; !st.Ok() {
				t.Fatalf("open by node after the unlink of another name: %v, want OK", st)
			}
		})
	}
}

// TestRetryWaitsOnlyWhenAPathMayBeStale pins nameChanges.retry: an ENOENT
// with no name change under way or finished since is returned at once
// (one attempt); one while a rename is under way waits for it and runs
// again once it has succeeded (its tree update may have given the
// directory another path); one whose concurrent change failed is
// returned after the wait, not run again.
func TestRetryWaitsOnlyWhenAPathMayBeStale(t *testing.T) {
	var c nameChanges
	calls := 0
	failOnce := func() fuse.Status {
		calls++
		if calls == 1 {
			return fuse.ENOENT
		}
		return fuse.OK
	}
	if st := c.retry(false, failOnce); st != fuse.ENOENT || calls != 1 {
		t.Fatalf("with no name change: %v after %d attempts, want ENOENT after 1", st, calls)
	}
	for _, ok := range []bool{true, false} {
		calls = 0
		end := c.changing() // a RENAME under way
		res := make(chan fuse.Status, 1)
		go func() { res <- c.retry(false, failOnce) }()
		// Wait until the retry waits for the rename (a writer is
		// pending, so a new reader cannot get in).
		for c.mu.TryRLock() {
			c.mu.RUnlock()
			select {
			case st := <-res:
				t.Fatalf("the retry returned %v while a rename was under way, want it to wait", st)
			default:
				runtime.Gosched()
			}
		}
		end(ok)
		st := <-res
		want, wantCalls := fuse.OK, 2
		if !ok {
			want, wantCalls = fuse.ENOENT, 1
		}
		if st != want || calls != wantCalls {
			t.Errorf("the rename ended ok=%v: %v after %d attempts, want %v after %d", ok, st, calls, want, wantCalls)
		}
	}
}
