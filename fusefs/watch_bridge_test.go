package fusefs

import (
	"log/slog"
	"os"
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
	fs.NewNodeFS(f.root, &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec})
	select {
	case <-applied:
		t.Fatal("a batch was applied before the mount had its server")
	default:
	}
	f.SetServer(nil) // as Mount does after serve
	if evs := <-applied; len(evs) != 1 || evs[0].Path != "a/b" {
		t.Fatalf("applied %v, want the queued a/b", evs)
	}
}

// TestInvalidatorWaitsForServer: go-fuse's bridge learns its server in
// Init (fuse.NewServer), after the node bridge exists, and every kernel
// notification reads it. The invalidator must not notify before the mount
// has its server (FS.SetServer): under -race an event queued before the
// mount was a data race between rawBridge.Init and Inode.NotifyEntry
// (seen in TestMultiMountStaleRefused/three-poll). Needs root and
// /dev/fuse: it mounts.
func TestInvalidatorWaitsForServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	f, err := New(Config{Workspace: t.TempDir(), Guard: guard.New(guard.Config{Mode: guard.ModeEnforce}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	inv := f.AttachWatcher(WatchOptions{})
	defer inv.Close()
	applied := make(chan []watcher.Event, 4)
	inv.SetBatchHook(func(evs []watcher.Event) { applied <- evs })
	inv.Events([]watcher.Event{{Path: "x", Op: watcher.Write}}) // notifies the root
	server, err := f.Mount(t.TempDir(), MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Unmount()
	if evs := <-applied; len(evs) != 1 || evs[0].Path != "x" {
		t.Fatalf("applied %v, want the queued x", evs)
	}
}
