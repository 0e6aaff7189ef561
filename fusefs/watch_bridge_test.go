package fusefs

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/rubinofs/rubinofs/guard"
	"github.com/rubinofs/rubinofs/watcher"
)

// TestInvalidatorWaitsForBridge: the watcher starts before the mount, so
// external changes can be queued before go-fuse's node bridge exists. The
// invalidator must not walk the inode tree until the bridge has initialised
// the root inode (it writes the root's children unlocked): under -race this
// test reported a data race between inodeChildren.init and GetChild.
func TestInvalidatorWaitsForBridge(t *testing.T) {
	f, err := New(Config{Workspace: t.TempDir(), Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	inv := f.AttachWatcher(WatchOptions{})
	defer inv.Close()
	applied := make(chan []watcher.Event, 4)
	inv.SetBatchHook(func(evs []watcher.Event) { applied <- evs })
	inv.Events([]watcher.Event{{Path: "a/b", Op: watcher.Write}})
	select {
	case <-applied:
		t.Fatal("a batch was applied before the node bridge existed")
	default:
	}
	sec := time.Second
	f.nodeFS(&fs.Options{EntryTimeout: &sec, AttrTimeout: &sec})
	if evs := <-applied; len(evs) != 1 || evs[0].Path != "a/b" {
		t.Fatalf("applied %v, want the queued a/b", evs)
	}
}
