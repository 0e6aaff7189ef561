package fusefs

// rawHooks is the adapter's own layer over go-fuse's node bridge: the few
// requests whose bookkeeping needs what only the raw request carries (the
// umask, the cancel channel of a page-in READ or of a RELEASE, the file
// handle's number that the descriptor budget counts: fdbudget.go) or must
// bracket the bridge's update of its tree. The observability room's
// wrapper (Config.Observe, internal/observe) goes over it.

import (
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serve is fs.Mount with the raw file system wrapped in rawHooks and then
// in the observability room's wrapper (Observer.Wrap): it builds the node
// bridge over f.root, starts the server (Ended is closed when Serve
// returns) and returns once the kernel answers (WaitMount). Errors: those
// of fuse.NewServer (mount(2), fusermount3) and of WaitMount; as in
// fs.Mount, a failed WaitMount leaves the serve loop to end by itself.
func (f *FS) serve(mountpoint string, opts *fs.Options) (*fuse.Server, error) {
	raw := f.cfg.Observe.Wrap(&rawHooks{RawFileSystem: fs.NewNodeFS(f.root, opts), fs: f})
	server, err := fuse.NewServer(raw, mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go func() { server.Serve(); close(f.ended) }()
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}

// rawHooks overrides the requests named in the file comment; every other
// method is the bridge's.
type rawHooks struct {
	fuse.RawFileSystem
	fs *FS
}

func (r *rawHooks) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, n string, out *fuse.EntryOut) fuse.Status {
	forget := withUmask(cancel, in.Umask) // syscallcompat requests.go
	defer forget()
	return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.Mknod(cancel, in, n, out) }) // names.go
}

func (r *rawHooks) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, n string, out *fuse.EntryOut) fuse.Status {
	forget := withUmask(cancel, in.Umask) // syscallcompat requests.go
	defer forget()
	return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.Mkdir(cancel, in, n, out) }) // names.go
}

func (r *rawHooks) Create(cancel <-chan struct{}, in *fuse.CreateIn, n string, out *fuse.CreateOut) fuse.Status {
	forget := withUmask(cancel, in.Umask) // syscallcompat requests.go
	defer forget()
	return r.fs.fds.opening(&in.Caller, &out.Fh, func() fuse.Status {
		return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.Create(cancel, in, n, out) }) // names.go
	})
}

func (r *rawHooks) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	forget := withUmask(cancel, in.Umask) // syscallcompat requests.go
	defer forget()
	return r.fs.fds.opening(&in.Caller, &out.Fh, func() fuse.Status {
		return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.Tmpfile(cancel, in, out) }) // names.go
	})
}

func (r *rawHooks) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return r.fs.fds.opening(&in.Caller, &out.Fh, func() fuse.Status { return r.RawFileSystem.OpenDir(cancel, in, out) })
}

func (r *rawHooks) ReleaseDir(in *fuse.ReleaseIn) {
	r.fs.fds.released(in.Fh) // before the bridge frees the number
	r.RawFileSystem.ReleaseDir(in)
}

func (r *rawHooks) Unlink(cancel <-chan struct{}, h *fuse.InHeader, n string) fuse.Status {
	// Bracketed until the bridge updated its tree, and run again when a
	// rename made the directory's path stale (names.go).
	return r.fs.names.retry(true, func() fuse.Status { return r.RawFileSystem.Unlink(cancel, h, n) })
}

func (r *rawHooks) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, n string) fuse.Status {
	// Bracketed until the bridge updated its tree, and run again when a
	// rename made the directory's path stale (names.go).
	return r.fs.names.retry(true, func() fuse.Status { return r.RawFileSystem.Rmdir(cancel, h, n) })
}

func (r *rawHooks) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, n string, out *fuse.EntryOut) fuse.Status {
	return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.Symlink(cancel, h, target, n, out) }) // names.go
}

func (r *rawHooks) Link(cancel <-chan struct{}, in *fuse.LinkIn, n string, out *fuse.EntryOut) fuse.Status {
	return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.Link(cancel, in, n, out) }) // names.go
}

// SetAttr, Readlink and the extended-attribute requests reach the
// backing file by the node's path too (unless through a handle), so they
// run again when a rename made that path stale (names.go).

func (r *rawHooks) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.SetAttr(cancel, in, out) })
}

func (r *rawHooks) Readlink(cancel <-chan struct{}, h *fuse.InHeader) (target []byte, st fuse.Status) {
	st = r.fs.names.retry(false, func() fuse.Status {
		target, st = r.RawFileSystem.Readlink(cancel, h)
		return st
	})
	return target, st
}

func (r *rawHooks) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (sz uint32, st fuse.Status) {
	st = r.fs.names.retry(false, func() fuse.Status {
		sz, st = r.RawFileSystem.GetXAttr(cancel, h, attr, dest)
		return st
	})
	return sz, st
}

func (r *rawHooks) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (sz uint32, st fuse.Status) {
	st = r.fs.names.retry(false, func() fuse.Status {
		sz, st = r.RawFileSystem.ListXAttr(cancel, h, dest)
		return st
	})
	return sz, st
}

func (r *rawHooks) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.SetXAttr(cancel, in, attr, data) })
}

func (r *rawHooks) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return r.fs.names.retry(false, func() fuse.Status { return r.RawFileSystem.RemoveXAttr(cancel, h, attr) })
}

func (r *rawHooks) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	// Bracketed until the bridge updated its tree, and run again when a
	// rename made the directory's path stale (names.go).
	return r.fs.names.retry(true, func() fuse.Status { return r.RawFileSystem.Rename(cancel, in, oldName, newName) })
}

// Open asks for FOPEN_NOFLUSH on a read-only open (noflush.go) while no
// reader of .rubino/accesslog is attached. Open, Create, Tmpfile and
// OpenDir are counted by the descriptor budget until their RELEASE or
// RELEASEDIR (fdbudget.go: EMFILE past a uid's share).
func (r *rawHooks) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := r.fs.fds.opening(&in.Caller, &out.Fh, func() fuse.Status { return r.RawFileSystem.Open(cancel, in, out) })
	if st == fuse.OK && !r.fs.cfg.Observe.AccessLogActive() {
		out.OpenFlags |= noFlushFlag(in.Flags) // noflush.go
	}
	return st
}

func (r *rawHooks) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	forget := markPageIn(cancel, in) // syscallcompat requests.go
	defer forget()
	res, st := r.RawFileSystem.Read(cancel, in, buf)
	return copiedRead(res, st, buf) // docs/DESIGN.md#small-read-copy
}

func (r *rawHooks) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	r.fs.fds.released(in.Fh) // before the bridge frees the number
	r.RawFileSystem.Release(cancel, in)
	r.fs.released.releaseDone(cancel) // after go-fuse's own release bookkeeping (iomode.go)
}
