package observe

// rawWrap times, counts and logs every FUSE request without touching the
// node types: it wraps the fuse.RawFileSystem the mount serves (the
// adapter's layer over go-fuse's node bridge, fusefs.FS.Mount) and
// overrides each operation. Per request it costs
// two time.Now calls, a counter increment and a histogram observation on
// observers resolved once per op; an access-log line is built only while a
// reader of .rubino/accesslog is attached (one atomic load otherwise).
//
// The session a line names never makes a request wait on its caller
// (docs/DESIGN.md#no-wait-on-caller): a request on an open handle (READ,
// WRITE, FLUSH, FSYNC, RELEASE, locks, SETATTR with a handle, ...) names
// the session its OPEN, CREATE or OPENDIR line named, kept by handle and
// never resolved again ("-" when the handle was opened while no reader was
// attached); FLUSH in particular is sent from inside execve when the exec
// closes a descriptor on the mount. Other requests resolve the caller
// through the session registry, whose /proc reads are bounded
// (procfs.Bound).

import (
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/sessions"
)

// rawWrap is the timing, counting and logging layer over the adapter's raw
// file system (Observer.Wrap).
// Methods it does not override (String, SetDebug, Init) pass through;
// TestRawWrapCoversEveryOp fails when any other fuse.RawFileSystem method
// is not wrapped here.
type rawWrap struct {
	fuse.RawFileSystem
	o *Observer
	m *fsMetrics

	// handles maps an open file or directory handle (its Fh) to the
	// session its opening line named; entries are made only while a
	// reader is attached and dropped at RELEASE and RELEASEDIR.
	handles sync.Map // uint64 -> string
}

// done records op's metrics and returns its duration, and whether an
// access-log line is wanted (a reader is attached).
func (w *rawWrap) done(op opID, start time.Time, st fuse.Status) (time.Duration, bool) {
	d := time.Since(start)
	w.m.record(op, d.Seconds(), st)
	return d, w.m.alog.active()
}

// emit publishes one access-log line. res, when >= 0 and the op succeeded,
// is shown after the status: bytes written, the new node id or file handle.
// sess is the session to name: w.session for a request by name,
// w.handleSession for one on an open handle.
func (w *rawWrap) emit(op opID, d time.Duration, st fuse.Status, c *fuse.Caller, sess string, res int64, format string, args ...any) {
	b := make([]byte, 0, 160)
	b = time.Now().AppendFormat(b, accessLogTime)
	b = fmt.Appendf(b, " [uid:%d,gid:%d,pid:%d,session:%s] %s ", c.Uid, c.Gid, c.Pid, sess, opNames[op])
	b = fmt.Appendf(b, format, args...)
	b = append(b, ": "...)
	if st == fuse.OK {
		b = append(b, "OK"...)
		if res >= 0 {
			b = fmt.Appendf(b, " (%d)", res)
		}
	} else {
		b = append(b, errnoName(syscall.Errno(st))...)
	}
	b = fmt.Appendf(b, " <%.6f>\n", d.Seconds())
	w.m.alog.publish(b, sess, c.Uid)
}

// session names the session of caller c for the access log ("-" for pid
// 0: RELEASE and FORGET-like requests carry none, and "-" without a Host);
// a caller outside every session is its uid's default session
// (Host.RequestSession). The registry answers within procfs.Bound:
// sessions.Unknown ("-") when the caller's /proc files did not answer
// by then.
func (w *rawWrap) session(c *fuse.Caller) string {
	if c.Pid == 0 || w.o.host == nil {
		return "-"
	}
	return w.o.host.RequestSession(c.Pid, c.Uid)
}

// handleSession names the session of the open handle fh for the access
// log, without resolving anything: the session its opening line named, or
// "-" when it was opened while no reader was attached.
func (w *rawWrap) handleSession(fh uint64) string {
	if v, ok := w.handles.Load(fh); ok {
		return v.(string)
	}
	return sessions.Unknown
}

// opened records the session of a handle just opened by a request of
// caller c (st is the request's status) and returns it, for its line.
func (w *rawWrap) opened(st fuse.Status, c *fuse.Caller, fh uint64) string {
	sess := w.session(c)
	if st == fuse.OK {
		w.handles.Store(fh, sess)
	}
	return sess
}

// name quotes a file name for the access log when it holds control
// characters (a newline would split the line) or a comma or parenthesis;
// plain names go as they are.
func name(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == ',' || c == '(' || c == ')' || c == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

func (w *rawWrap) Lookup(cancel <-chan struct{}, h *fuse.InHeader, n string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Lookup(cancel, h, n, out)
	if d, ok := w.done(opLookup, start, st); ok {
		w.emit(opLookup, d, st, &h.Caller, w.session(&h.Caller), int64(out.NodeId), "(%d,%s)", h.NodeId, name(n))
	}
	return st
}

// Forget is counted only (no caller, no reply, no access-log line; as
// JuiceFS).
func (w *rawWrap) Forget(nodeid, nlookup uint64) {
	start := time.Now()
	w.RawFileSystem.Forget(nodeid, nlookup)
	w.m.record(opForget, time.Since(start).Seconds(), fuse.OK)
}

func (w *rawWrap) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.GetAttr(cancel, in, out)
	if d, ok := w.done(opGetattr, start, st); ok {
		w.emit(opGetattr, d, st, &in.Caller, w.getattrSession(in), -1, "(%d)", in.NodeId)
	}
	return st
}

func (w *rawWrap) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.SetAttr(cancel, in, out)
	if d, ok := w.done(opSetattr, start, st); ok {
		w.emit(opSetattr, d, st, &in.Caller, w.setattrSession(in), -1, "(%d,0x%x,size=%d,mode=%o)", in.NodeId, in.Valid, in.Size, in.Mode)
	}
	return st
}

func (w *rawWrap) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, n string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Mknod(cancel, in, n, out)
	if d, ok := w.done(opMknod, start, st); ok {
		w.emit(opMknod, d, st, &in.Caller, w.session(&in.Caller), int64(out.NodeId), "(%d,%s,%o,0x%x)", in.NodeId, name(n), in.Mode, in.Rdev)
	}
	return st
}

func (w *rawWrap) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, n string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Mkdir(cancel, in, n, out)
	if d, ok := w.done(opMkdir, start, st); ok {
		w.emit(opMkdir, d, st, &in.Caller, w.session(&in.Caller), int64(out.NodeId), "(%d,%s,%o)", in.NodeId, name(n), in.Mode)
	}
	return st
}

func (w *rawWrap) Unlink(cancel <-chan struct{}, h *fuse.InHeader, n string) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Unlink(cancel, h, n)
	if d, ok := w.done(opUnlink, start, st); ok {
		w.emit(opUnlink, d, st, &h.Caller, w.session(&h.Caller), -1, "(%d,%s)", h.NodeId, name(n))
	}
	return st
}

func (w *rawWrap) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, n string) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Rmdir(cancel, h, n)
	if d, ok := w.done(opRmdir, start, st); ok {
		w.emit(opRmdir, d, st, &h.Caller, w.session(&h.Caller), -1, "(%d,%s)", h.NodeId, name(n))
	}
	return st
}

func (w *rawWrap) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Rename(cancel, in, oldName, newName)
	if d, ok := w.done(opRename, start, st); ok {
		w.emit(opRename, d, st, &in.Caller, w.session(&in.Caller), -1, "(%d,%s,%d,%s,%d)", in.NodeId, name(oldName), in.Newdir, name(newName), in.Flags)
	}
	return st
}

func (w *rawWrap) Link(cancel <-chan struct{}, in *fuse.LinkIn, n string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Link(cancel, in, n, out)
	if d, ok := w.done(opLink, start, st); ok {
		w.emit(opLink, d, st, &in.Caller, w.session(&in.Caller), int64(out.NodeId), "(%d,%d,%s)", in.Oldnodeid, in.NodeId, name(n))
	}
	return st
}

func (w *rawWrap) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, n string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Symlink(cancel, h, target, n, out)
	if d, ok := w.done(opSymlink, start, st); ok {
		w.emit(opSymlink, d, st, &h.Caller, w.session(&h.Caller), int64(out.NodeId), "(%d,%s,%s)", h.NodeId, name(n), name(target))
	}
	return st
}

func (w *rawWrap) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	start := time.Now()
	out, st := w.RawFileSystem.Readlink(cancel, h)
	if d, ok := w.done(opReadlink, start, st); ok {
		w.emit(opReadlink, d, st, &h.Caller, w.session(&h.Caller), -1, "(%d)", h.NodeId)
	}
	return out, st
}

func (w *rawWrap) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Access(cancel, in)
	if d, ok := w.done(opAccess, start, st); ok {
		w.emit(opAccess, d, st, &in.Caller, w.session(&in.Caller), -1, "(%d,0x%x)", in.NodeId, in.Mask)
	}
	return st
}

func (w *rawWrap) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	start := time.Now()
	sz, st := w.RawFileSystem.GetXAttr(cancel, h, attr, dest)
	if d, ok := w.done(opGetxattr, start, st); ok {
		w.emit(opGetxattr, d, st, &h.Caller, w.session(&h.Caller), int64(sz), "(%d,%s,%d)", h.NodeId, name(attr), len(dest))
	}
	return sz, st
}

func (w *rawWrap) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	start := time.Now()
	sz, st := w.RawFileSystem.ListXAttr(cancel, h, dest)
	if d, ok := w.done(opListxattr, start, st); ok {
		w.emit(opListxattr, d, st, &h.Caller, w.session(&h.Caller), int64(sz), "(%d,%d)", h.NodeId, len(dest))
	}
	return sz, st
}

func (w *rawWrap) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.SetXAttr(cancel, in, attr, data)
	if d, ok := w.done(opSetxattr, start, st); ok {
		w.emit(opSetxattr, d, st, &in.Caller, w.session(&in.Caller), -1, "(%d,%s,%d,%d)", in.NodeId, name(attr), len(data), in.Flags)
	}
	return st
}

func (w *rawWrap) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.RemoveXAttr(cancel, h, attr)
	if d, ok := w.done(opRemovexattr, start, st); ok {
		w.emit(opRemovexattr, d, st, &h.Caller, w.session(&h.Caller), -1, "(%d,%s)", h.NodeId, name(attr))
	}
	return st
}

func (w *rawWrap) Create(cancel <-chan struct{}, in *fuse.CreateIn, n string, out *fuse.CreateOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Create(cancel, in, n, out)
	if d, ok := w.done(opCreate, start, st); ok {
		w.emit(opCreate, d, st, &in.Caller, w.opened(st, &in.Caller, out.Fh), int64(out.NodeId), "(%d,%s,%o,0x%x)", in.NodeId, name(n), in.Mode, in.Flags)
	}
	return st
}

func (w *rawWrap) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Tmpfile(cancel, in, out)
	if d, ok := w.done(opTmpfile, start, st); ok {
		w.emit(opTmpfile, d, st, &in.Caller, w.opened(st, &in.Caller, out.Fh), int64(out.NodeId), "(%d,%o,0x%x)", in.NodeId, in.Mode, in.Flags)
	}
	return st
}

func (w *rawWrap) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Open(cancel, in, out)
	if d, ok := w.done(opOpen, start, st); ok {
		w.emit(opOpen, d, st, &in.Caller, w.opened(st, &in.Caller, out.Fh), int64(out.Fh), "(%d,0x%x)", in.NodeId, in.Flags)
	}
	return st
}

// Read is neither timed nor logged when a stream control file served it
// (the access log itself): see fsMetrics.quiet.
func (w *rawWrap) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	start := time.Now()
	res, st := w.RawFileSystem.Read(cancel, in, buf)
	if w.m.takeQuiet(cancel) {
		return res, st
	}
	if d, ok := w.done(opRead, start, st); ok {
		// No byte count: a ReadResultFd's Size is the size asked for; the
		// bytes are only known when the server splices them.
		w.emit(opRead, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d,%d)", in.NodeId, in.Size, in.Offset, in.Fh)
	}
	return res, st
}

func (w *rawWrap) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Lseek(cancel, in, out)
	if d, ok := w.done(opLseek, start, st); ok {
		w.emit(opLseek, d, st, &in.Caller, w.handleSession(in.Fh), int64(out.Offset), "(%d,%d,%d,%d)", in.NodeId, in.Offset, in.Whence, in.Fh)
	}
	return st
}

func (w *rawWrap) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.GetLk(cancel, in, out)
	if d, ok := w.done(opGetlk, start, st); ok {
		w.emit(opGetlk, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d,%d-%d)", in.NodeId, in.Fh, in.Lk.Typ, in.Lk.Start, in.Lk.End)
	}
	return st
}

func (w *rawWrap) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.SetLk(cancel, in)
	if d, ok := w.done(opSetlk, start, st); ok {
		w.emit(opSetlk, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d,%d-%d)", in.NodeId, in.Fh, in.Lk.Typ, in.Lk.Start, in.Lk.End)
	}
	return st
}

func (w *rawWrap) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.SetLkw(cancel, in)
	if d, ok := w.done(opSetlkw, start, st); ok {
		w.emit(opSetlkw, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d,%d-%d)", in.NodeId, in.Fh, in.Lk.Typ, in.Lk.Start, in.Lk.End)
	}
	return st
}

func (w *rawWrap) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	start := time.Now()
	w.RawFileSystem.Release(cancel, in)
	sess, _ := w.handles.LoadAndDelete(in.Fh)
	if d, ok := w.done(opRelease, start, fuse.OK); ok {
		w.emit(opRelease, d, fuse.OK, &in.Caller, sessName(sess), -1, "(%d,%d)", in.NodeId, in.Fh)
	}
}

func (w *rawWrap) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := w.RawFileSystem.Write(cancel, in, data)
	if d, ok := w.done(opWrite, start, st); ok {
		w.emit(opWrite, d, st, &in.Caller, w.handleSession(in.Fh), int64(n), "(%d,%d,%d,%d)", in.NodeId, len(data), in.Offset, in.Fh)
	}
	return n, st
}

// Writev is what the server calls for WRITE; on ENOSYS it falls back to
// Write, which then counts the request.
func (w *rawWrap) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := w.RawFileSystem.Writev(cancel, in, data)
	if st == fuse.ENOSYS {
		return n, st
	}
	if d, ok := w.done(opWrite, start, st); ok {
		size := 0
		for _, b := range data {
			size += len(b)
		}
		w.emit(opWrite, d, st, &in.Caller, w.handleSession(in.Fh), int64(n), "(%d,%d,%d,%d)", in.NodeId, size, in.Offset, in.Fh)
	}
	return n, st
}

func (w *rawWrap) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	start := time.Now()
	n, st := w.RawFileSystem.CopyFileRange(cancel, in)
	if d, ok := w.done(opCopyFileRange, start, st); ok {
		w.emit(opCopyFileRange, d, st, &in.Caller, w.handleSession(in.FhIn), int64(n), "(%d,%d,%d,%d,%d)", in.NodeId, in.OffIn, in.NodeIdOut, in.OffOut, in.Len)
	}
	return n, st
}

func (w *rawWrap) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
	if d, ok := w.done(opIoctl, start, st); ok {
		w.emit(opIoctl, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,0x%x,%d)", in.NodeId, in.Cmd, in.Fh)
	}
	return st
}

func (w *rawWrap) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Flush(cancel, in)
	if d, ok := w.done(opFlush, start, st); ok {
		w.emit(opFlush, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d)", in.NodeId, in.Fh)
	}
	return st
}

func (w *rawWrap) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Fsync(cancel, in)
	if d, ok := w.done(opFsync, start, st); ok {
		w.emit(opFsync, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d)", in.NodeId, in.FsyncFlags, in.Fh)
	}
	return st
}

func (w *rawWrap) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Fallocate(cancel, in)
	if d, ok := w.done(opFallocate, start, st); ok {
		w.emit(opFallocate, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d,%d,%d)", in.NodeId, in.Mode, in.Offset, in.Length, in.Fh)
	}
	return st
}

func (w *rawWrap) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.OpenDir(cancel, in, out)
	if d, ok := w.done(opOpendir, start, st); ok {
		w.emit(opOpendir, d, st, &in.Caller, w.opened(st, &in.Caller, out.Fh), int64(out.Fh), "(%d)", in.NodeId)
	}
	return st
}

func (w *rawWrap) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.ReadDir(cancel, in, out)
	if d, ok := w.done(opReaddir, start, st); ok {
		w.emit(opReaddir, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d)", in.NodeId, in.Size, in.Offset)
	}
	return st
}

func (w *rawWrap) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.ReadDirPlus(cancel, in, out)
	if d, ok := w.done(opReaddirplus, start, st); ok {
		w.emit(opReaddirplus, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d,%d)", in.NodeId, in.Size, in.Offset)
	}
	return st
}

func (w *rawWrap) ReleaseDir(in *fuse.ReleaseIn) {
	start := time.Now()
	w.RawFileSystem.ReleaseDir(in)
	sess, _ := w.handles.LoadAndDelete(in.Fh)
	if d, ok := w.done(opReleasedir, start, fuse.OK); ok {
		w.emit(opReleasedir, d, fuse.OK, &in.Caller, sessName(sess), -1, "(%d,%d)", in.NodeId, in.Fh)
	}
}

// sessName is a handles value as a session name ("-" for none).
func sessName(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return sessions.Unknown
}

// setattrSession names the session of a SETATTR: its handle's when it
// carries one (ftruncate), else its caller's.
func (w *rawWrap) setattrSession(in *fuse.SetAttrIn) string {
	if fh, ok := in.GetFh(); ok {
		return w.handleSession(fh)
	}
	return w.session(&in.Caller)
}

// getattrSession names the session of a GETATTR: its handle's when it
// carries one (fstat), else its caller's.
func (w *rawWrap) getattrSession(in *fuse.GetAttrIn) string {
	if in.Flags()&fuse.FUSE_GETATTR_FH != 0 {
		return w.handleSession(in.Fh())
	}
	return w.session(&in.Caller)
}

func (w *rawWrap) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.FsyncDir(cancel, in)
	if d, ok := w.done(opFsyncdir, start, st); ok {
		w.emit(opFsyncdir, d, st, &in.Caller, w.handleSession(in.Fh), -1, "(%d,%d)", in.NodeId, in.FsyncFlags)
	}
	return st
}

func (w *rawWrap) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.StatFs(cancel, h, out)
	if d, ok := w.done(opStatfs, start, st); ok {
		w.emit(opStatfs, d, st, &h.Caller, w.session(&h.Caller), -1, "(%d)", h.NodeId)
	}
	return st
}

func (w *rawWrap) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	start := time.Now()
	st := w.RawFileSystem.Statx(cancel, in, out)
	if d, ok := w.done(opStatx, start, st); ok {
		w.emit(opStatx, d, st, &in.Caller, w.session(&in.Caller), -1, "(%d,0x%x)", in.NodeId, in.SxMask)
	}
	return st
}

// OnUnmount ends the stream readers once the server has served its last
// request.
func (w *rawWrap) OnUnmount() {
	w.RawFileSystem.OnUnmount()
	w.o.CloseStreams()
}
