package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rubinofs/rubinofs/bench/internal/benchkit"
	"github.com/rubinofs/rubinofs/internal/observe"
	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// loop is a bare go-fuse loopback whose requests are counted by opcode
// by the same layer that counts rubinofs's (observe.Observer.Wrap, the
// rubinofs_fuse_ops_total family of .rubino/metrics).
type loop struct {
	name, dir, back string
	reg             *prometheus.Registry
}

// floorNode is the floor's loopback node: go-fuse's LoopbackNode, whose
// opens ask the kernel to keep the page cache (FOPEN_KEEP_CACHE: go-fuse
// drops it for a passthrough handle, which has none) and to send no FLUSH
// at close (FOPEN_NOFLUSH), and whose directory opens keep the listing
// in the kernel (FOPEN_CACHE_DIR with FOPEN_KEEP_CACHE). It still sees
// every open, of files and of directories.
type floorNode struct{ fs.LoopbackNode }

const fileFlags = fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH

func (n *floorNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	return fh, ff | fileFlags, errno
}

func (n *floorNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ino, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return ino, fh, ff | fileFlags, errno
}

func (n *floorNode) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	return fh, ff | fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, errno
}

// mountLoop mounts a loopback of tmp/name-back at tmp/name. With floor
// set it is the floor mount: floorNode, entry, attribute and negative
// timeouts of timeout, and the kernel-facing options rubinofs mounts
// with that change what the kernel sends (default_permissions, POSIX
// ACLs, atomic O_TRUNC; fusefs.FS.Mount); without, go-fuse's plain
// LoopbackNode with those timeouts (nil: zero). As root it mounts
// directly, and go-fuse's loopback hands every open file to the kernel
// (passthrough), so no READ or WRITE reaches it. Teardown unmounts it.
func mountLoop(tmp, name string, timeout *time.Duration, floor bool) (*loop, error) {
	back, mnt := filepath.Join(tmp, name+"-back"), filepath.Join(tmp, name)
	for _, d := range []string{back, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	root := &fs.LoopbackRoot{Path: back}
	var st syscall.Stat_t
	if err := syscall.Stat(back, &st); err != nil {
		return nil, err
	}
	root.Dev = uint64(st.Dev)
	if floor {
		root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
			return &floorNode{fs.LoopbackNode{RootData: r}}
		}
	}
	var rootNode fs.InodeEmbedder = &fs.LoopbackNode{RootData: root}
	if floor {
		rootNode = root.NewNode(root, nil, "", &st)
	}
	root.RootNode = rootNode
	zero := time.Duration(0)
	if timeout == nil {
		timeout = &zero
	}
	mo := fuse.MountOptions{FsName: back, Name: "floor", DirectMount: os.Geteuid() == 0, DirectMountStrict: os.Geteuid() == 0}
	if *ioURing {
		mo.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	}
	if floor {
		mo.Options = []string{"default_permissions"}
		mo.EnableAcl = true
		mo.ExtraCapabilities |= fuse.CAP_ATOMIC_O_TRUNC
		mo.MaxWrite = 1 << 20
	}
	opts := &fs.Options{EntryTimeout: timeout, AttrTimeout: timeout, NegativeTimeout: timeout, MountOptions: mo}
	obs := observe.New(nil)
	raw := obs.Wrap(fs.NewNodeFS(rootNode, opts))
	// As fusefs.FS.Mount: no child this process starts may inherit the
	// mount's /dev/fuse descriptor (go-fuse opens it without O_CLOEXEC).
	if mo.DirectMount {
		syscall.ForkLock.RLock()
	}
	srv, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if mo.DirectMount {
		syscallcompat.CloexecFuseFds()
		syscall.ForkLock.RUnlock()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if *ioURing && !srv.URingNegotiated() {
		return nil, fmt.Errorf("%s: the kernel did not accept FUSE over io_uring", name)
	}
	benchkit.AtExit(func() {
		if err := srv.Unmount(); err != nil {
			log.Printf("%s: unmount: %v; detaching", name, err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return &loop{name: name, dir: mnt, back: back, reg: obs.Registry()}, nil
}
