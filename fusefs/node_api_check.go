package fusefs

import "github.com/hanwen/go-fuse/v2/fs"

// Compile-time checks that our types implement the go-fuse interfaces we rely
// on (gocryptfs' *_api_check.go pattern). A go-fuse upgrade that changes a
// signature fails here instead of silently falling back to a default.
//
// Node's list is every node interface go-fuse's *fs.LoopbackNode implements
// (v2.12.1 fs/loopback.go, loopback_linux.go, loopback_unix.go: Statfs,
// Lookup, Mknod, Mkdir, Rmdir, Unlink, Rename, Create, Symlink, Link,
// Readlink, Open, OpendirHandle, Readdir, Getattr, Setattr, Getxattr,
// Setxattr, Removexattr, Listxattr, CopyFileRange, Tmpfile, Statx), which
// Node embedded until it embedded fs.Inode alone: none of them falls back
// to go-fuse's default.
var (
	_ fs.InodeEmbedder       = (*Node)(nil)
	_ fs.NodeLookuper        = (*Node)(nil)
	_ fs.NodeOpener          = (*Node)(nil)
	_ fs.NodeCreater         = (*Node)(nil)
	_ fs.NodeUnlinker        = (*Node)(nil)
	_ fs.NodeRenamer         = (*Node)(nil)
	_ fs.NodeSetattrer       = (*Node)(nil)
	_ fs.NodeCopyFileRanger  = (*Node)(nil)
	_ fs.NodeOpendirHandler  = (*Node)(nil)
	_ fs.NodeStatfser        = (*Node)(nil)
	_ fs.NodeGetattrer       = (*Node)(nil)
	_ fs.NodeMkdirer         = (*Node)(nil)
	_ fs.NodeRmdirer         = (*Node)(nil)
	_ fs.NodeSymlinker       = (*Node)(nil)
	_ fs.NodeLinker          = (*Node)(nil)
	_ fs.NodeReadlinker      = (*Node)(nil)
	_ fs.NodeMknoder         = (*Node)(nil)
	_ fs.NodeGetxattrer      = (*Node)(nil)
	_ fs.NodeSetxattrer      = (*Node)(nil)
	_ fs.NodeRemovexattrer   = (*Node)(nil)
	_ fs.NodeListxattrer     = (*Node)(nil)
	_ fs.NodeReaddirer       = (*Node)(nil)
	_ fs.NodeStatxer         = (*Node)(nil)
	_ fs.NodeTmpfiler        = (*Node)(nil)
	_ fs.FileReader          = (*File)(nil)
	_ fs.FileWriter          = (*File)(nil)
	_ fs.FileFlusher         = (*File)(nil)
	_ fs.FileReleaser        = (*File)(nil)
	_ fs.FileAllocater       = (*File)(nil)
	_ fs.FileSetattrer       = (*File)(nil)
	_ fs.FileGetattrer       = (*File)(nil)
	_ fs.FileSetlkwer        = (*File)(nil)
	_ fs.FileFsyncer         = (*File)(nil)
	_ fs.FileLseeker         = (*File)(nil)
	_ fs.FilePassthroughFder = (*ptFile)(nil)
	_ fs.FileReader          = (*ptFile)(nil)
	_ fs.FileWriter          = (*ptFile)(nil)
	_ fs.FileFlusher         = (*ptFile)(nil)
	_ fs.FileReleaser        = (*ptFile)(nil)
	_ fs.FilePassthroughFder = (*ptWriter)(nil)
	_ fs.FileReleaser        = (*ptWriter)(nil)
	_ fs.FileWriter          = (*plainFile)(nil)
	_ fs.FileReleaser        = (*plainFile)(nil)
	_ fs.FilePassthroughFder = (*keptFile)(nil)
	_ fs.FileReleaser        = (*keptFile)(nil)
	_ fs.FileReaddirenter    = (*listDir)(nil)
	_ fs.FileSeekdirer       = (*listDir)(nil)
	_ fs.FileReleasedirer    = (*listDir)(nil)
)

// A guarded handle must never offer a passthrough descriptor.
var _ = func() bool {
	var h any = (*File)(nil)
	if _, ok := h.(fs.FilePassthroughFder); ok {
		panic("fusefs.File must not implement FilePassthroughFder")
	}
	return true
}()
