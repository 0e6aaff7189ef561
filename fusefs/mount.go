package fusefs

import (
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rubinofs/rubinofs/internal/procfs"
	"github.com/rubinofs/rubinofs/internal/syscallcompat"
)

// MountOptions are the kernel-facing options of a mount.
type MountOptions struct {
	// Options are FUSE mount options as given to -o (allow_other, ro, ...);
	// default_permissions is always added (permissions as on the backing fs).
	Options []string
	// EntryTimeout, AttrTimeout and NegativeTimeout are the kernel cache
	// timeouts for backing nodes.
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration
	// KeepCache keeps the page cache across opens (only safe when an
	// invalidation source, the watcher, tells the kernel about external
	// changes).
	KeepCache bool
	// Debug logs every FUSE request (go-fuse's request trace, at level
	// debug of the FS's Logger).
	Debug bool
	// AllowNonEmpty mounts over a non-empty directory (in-place mounts).
	AllowNonEmpty bool
	// AlsoAt: other names of the mountpoint for callers' paths (ctlhost.Mountpoint.Set).
	AlsoAt []string
	// IOURing asks the kernel for FUSE over io_uring (CAP_OVER_IO_URING);
	// it is used only where the kernel offers it (docs/DESIGN.md#fuse-io-uring).
	IOURing bool
}

// Mount mounts f at mountpoint and returns the running server. As root it
// mounts directly (mount(2)); otherwise go-fuse uses fusermount3, from
// Debian's fuse3 package. The mount is up when Mount returns.
func (f *FS) Mount(mountpoint string, o MountOptions) (*fuse.Server, error) {
	if err := CheckMountpoint(mountpoint, o.AllowNonEmpty); err != nil {
		return nil, err
	}
	f.mountpoint.Set(mountpoint, o.AlsoAt...)
	f.oc.begin, f.oc.move = f.inv.OwnTracker(), f.inv.MoveTracker() // installed before the mount (ownChanges)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("no /dev/fuse: %w (load the fuse module, or run the container with --device /dev/fuse)", err)
	}
	// Locks stay in the kernel (EnableLocks false): exact POSIX, OFD and
	// flock semantics; go-fuse's loopback would take every fcntl lock as
	// an OFD lock of the daemon (wrong owner, l_pid 0). docs/POSIX.md.
	mo := fuse.MountOptions{
		FsName:            f.cfg.Workspace,
		Name:              "rubinofs",
		DirectMount:       os.Geteuid() == 0,
		EnableLocks:       false,
		Debug:             o.Debug,
		Logger:            fuseLogger(f.log, o.Debug), // the server's request trace (Debug) and read errors
		MaxWrite:          1 << 20,
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
		Options:           []string{"default_permissions"},
	}
	// DIRECT_IO_ALLOW_MMAP: a MAP_SHARED mmap of a direct-I/O handle
	// (refusableIO) works, instead of ENODEV (fs/fuse/file.c). DONT_MASK:
	// the daemon applies the caller's umask or the directory's default ACL
	// (umaskmode.go). ACLs take part in the kernel's permission checks
	// (docs/DESIGN.md#posix-acl).
	mo.ExtraCapabilities |= fuse.CAP_DIRECT_IO_ALLOW_MMAP | fuse.CAP_DONT_MASK
	mo.EnableAcl = true
	if o.IOURing {
		mo.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	}
	for _, opt := range o.Options {
		switch opt {
		case "", "default_permissions": // always added
		case "allow_other":
			mo.AllowOther = true
		default:
			mo.Options = append(mo.Options, opt)
		}
	}
	f.keepCache = o.KeepCache
	if !mo.AllowOther {
		f.fds.perUID = f.fds.total // one user reaches the mount: no share to keep for others
	}
	opts := &fs.Options{
		MountOptions:    mo,
		EntryTimeout:    &o.EntryTimeout,
		AttrTimeout:     &o.AttrTimeout,
		NegativeTimeout: &o.NegativeTimeout,
		// Show mode 0000 as 0000: go-fuse would otherwise report it as
		// 0644, and default_permissions would then let anyone read it.
		NullPermissions: true,
		Logger:          fuseLogger(f.log, false), // the node bridge's diagnostics: anomalies only
	}
	// The root reports its backing directory's inode number as every node
	// does (backing.stableAttr); go-fuse's default is 0, which stat(2) shows
	// and ls -i prints as "?".
	var rst syscall.Stat_t
	if syscall.Fstat(int(f.bk.rootFd.Load()), &rst) == nil {
		opts.RootStableAttr = &fs.StableAttr{Ino: f.bk.stableAttr(&rst, 0).Ino}
	}
	// go-fuse (v2.12.1, mountDirect) opens /dev/fuse without O_CLOEXEC: a
	// child execed later would inherit it and keep the connection alive
	// after the daemon dies, so every access hangs (D state) instead of
	// failing with ENOTCONN. So a direct mount holds syscall.ForkLock (read
	// side: no fork+exec meanwhile) until close-on-exec is set below, with
	// DirectMountStrict (the fusermount3 fallback would fork under the
	// lock; as root it fails alike). fusermount3's descriptor (non-root)
	// is marked close-on-exec by go-fuse.
	if mo.DirectMount {
		opts.MountOptions.DirectMountStrict = true
		syscall.ForkLock.RLock()
	}
	server, err := f.serve(mountpoint, opts) // rawwrap.go: fs.Mount with per-op metrics and access log
	if mo.DirectMount {
		syscallcompat.CloexecFuseFds()
		syscall.ForkLock.RUnlock()
	}
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", mountpoint, err)
	}
	f.SetServer(server)
	return server, nil
}

// Transport names how the mount's requests reach the daemon: "io_uring"
// once the kernel accepted FUSE over io_uring, else "/dev/fuse"; and how
// many requests the ring threads answered. Safe for concurrent use.
func (f *FS) Transport() (name string, ringRequests int64) {
	s := f.server.Load()
	if s == nil || !s.URingNegotiated() {
		return "/dev/fuse", 0
	}
	return "io_uring", s.URingServed()
}

// CheckMountpoint reports a clear error for a missing mountpoint, one that
// is not a directory, one that is not empty (unless allowNonEmpty) and one
// that is already a mount (live or dead).
func CheckMountpoint(mountpoint string, allowNonEmpty bool) error {
	st, err := os.Stat(mountpoint)
	if err != nil {
		if errors.Is(err, syscall.ENOTCONN) {
			return fmt.Errorf("mountpoint %s is a dead FUSE mount (ENOTCONN): clear it with `rubinofs unmount %s`", mountpoint, mountpoint)
		}
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("mountpoint %s does not exist: create it with mkdir", mountpoint)
		}
		return fmt.Errorf("mountpoint %s: %w", mountpoint, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mountpoint %s is not a directory", mountpoint)
	}
	if abs, err := filepath.Abs(mountpoint); err == nil {
		if mounted, _ := procfs.IsMountpoint(abs); mounted {
			if _, dead := DeadMount(abs); dead {
				return fmt.Errorf("mountpoint %s is a dead FUSE mount (ENOTCONN): clear it with `rubinofs unmount %s`", mountpoint, mountpoint)
			}
			return fmt.Errorf("mountpoint %s is already a mount point: unmount it first", mountpoint)
		}
	}
	if allowNonEmpty {
		return nil
	}
	d, err := os.Open(mountpoint)
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", mountpoint, err)
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err != io.EOF {
		return fmt.Errorf("mountpoint %s is not empty (use an empty directory, or --in-place to mount over the workspace)", mountpoint)
	}
	return nil
}

// ErrBusy is returned (wrapped) by Unmount for a live mount that is in use:
// a process has a file open there, its working directory there, or a
// running task of the mount. It wraps syscall.EBUSY, the errno umount2(2)
// gives; `rubinofs unmount` exits with ExitBusy then.
var ErrBusy = fmt.Errorf("busy: files are open or a process has its working directory there (close them, stop the tasks, or use --lazy): %w", syscall.EBUSY)

// ErrNotMounted is Unmount's (wrapped) error for a non-mount (EINVAL).
var ErrNotMounted = errors.New("not a mount point")

// ErrNotOwner is Unmount's (wrapped) error, as a user other than root,
// for a mount made by another user: fusermount3 unmounts only its
// caller's own mounts. It wraps syscall.EPERM.
var ErrNotOwner = fmt.Errorf("the mount is not yours: only the user who mounted it, or root, may unmount it: %w", syscall.EPERM)

// Unmount unmounts the mount at mountpoint and reports what it did.
//
//   - A dead FUSE mount, whose daemon is gone (DeadMount: ENOTCONN), is
//     detached (MNT_DETACH, `fusermount3 -uz` as non-root): it has no server
//     to wait for, and a detach cannot be refused as busy.
//   - A live mount is unmounted normally: if it is in use the kernel refuses
//     with EBUSY and Unmount returns an error wrapping ErrBusy, leaving the
//     mount untouched.
//   - With lazy, a live mount is detached at once (MNT_DETACH): it leaves
//     the namespace, new lookups no longer reach it, and open files and
//     working directories keep working until they are closed; the daemon
//     serves them and exits when the last one goes (daemon.Daemon notices
//     the detach and stops its tasks, which would otherwise keep it busy).
//
// As root it calls umount2(2) directly, otherwise fusermount3 (Debian's
// fuse3). Errors: ErrBusy, ErrNotMounted, ErrNotOwner (all wrapped, with
// the path), and others of umount2 or fusermount3. Source: umount2(2); fuse(4) for the
// ENOTCONN of an aborted connection.
func Unmount(mountpoint string, lazy bool) (what string, err error) {
	return UnmountWith(mountpoint, lazy, nil)
}

// UnmountWith is Unmount with the probe of whether the mount's server is
// gone made by probe (nil: DeadMount's, in this process): probe(abs)
// returns the error of a stat and a statfs of the mountpoint, ENOTCONN
// when the server is gone. A command whose process must be able to exit
// makes that probe in a child process: a FUSE request the server has read
// and holds is waited for uninterruptibly, and no process with a thread in
// that wait can exit.
func UnmountWith(mountpoint string, lazy bool, probe func(abs string) error) (what string, err error) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", err
	}
	var dead bool
	if probe == nil {
		_, dead = DeadMount(abs)
	} else {
		dead = errors.Is(probe(abs), syscall.ENOTCONN)
	}
	detach := lazy || dead
	if err := unmount(abs, detach); err != nil {
		return "", err
	}
	switch {
	case dead:
		return fmt.Sprintf("cleared the dead mount at %s (its daemon was gone: ENOTCONN)", abs), nil
	case lazy:
		return fmt.Sprintf("detached %s lazily: open files keep working until closed, then the daemon exits", abs), nil
	}
	return fmt.Sprintf("unmounted %s", abs), nil
}

// unmount is umount2(abs, detach ? MNT_DETACH : 0) as root, fusermount3
// -u[z] otherwise, with EBUSY and EINVAL mapped to ErrBusy and
// ErrNotMounted.
func unmount(abs string, detach bool) error {
	flags, args := 0, []string{"-u"}
	if detach {
		flags, args = syscall.MNT_DETACH, []string{"-uz"}
	}
	if os.Geteuid() != 0 {
		out, err := exec.Command("fusermount3", append(args, abs)...).CombinedOutput()
		if err != nil {
			msg := strings.TrimSpace(string(out))
			switch {
			case strings.Contains(msg, "busy"):
				return fmt.Errorf("unmount %s: %w", abs, ErrBusy)
			case strings.Contains(msg, "not found in /etc/mtab"), strings.Contains(msg, "Invalid argument"):
				// fusermount3 says the same of another user's mount
				// as of no mount: mountinfo tells them apart.
				if mounted, _ := procfs.IsMountpoint(abs); mounted {
					return fmt.Errorf("unmount %s: %w", abs, ErrNotOwner)
				}
				return fmt.Errorf("unmount %s: %w", abs, ErrNotMounted)
			}
			return fmt.Errorf("fusermount3 %s %s: %v: %s", strings.Join(args, " "), abs, err, msg)
		}
		return nil
	}
	for {
		err := syscall.Unmount(abs, flags)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EBUSY):
			return fmt.Errorf("unmount %s: %w", abs, ErrBusy)
		case errors.Is(err, syscall.EINVAL):
			return fmt.Errorf("unmount %s: %w", abs, ErrNotMounted)
		}
		return fmt.Errorf("unmount %s: %w", abs, err)
	}
}

// RecoverDeadMount clears a dead rubinofs mount at mountpoint before a new
// mount there: when DeadMount finds a dead fuse.rubinofs mount at that path
// (the daemon was killed, the kernel aborted the FUSE connection), the mount is detached (MNT_DETACH, or
// `fusermount3 -uz` as non-root) and RecoverDeadMount returns a message
// saying what it did. It returns "" and nil when there is nothing to recover (the
// path is not a dead mount). A dead FUSE mount of another file system is
// left alone: an error names it and the command that clears it. Processes
// that still hold files of the dead mount keep getting ENOTCONN from them;
// they do not keep the mountpoint busy.
func RecoverDeadMount(mountpoint string) (string, error) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", err
	}
	fstype, dead := DeadMount(abs)
	if !dead {
		return "", nil
	}
	if fstype == "" {
		return "", fmt.Errorf("mountpoint %s: ENOTCONN, but it is not listed in /proc/self/mountinfo (another mount namespace?)", abs)
	}
	if fstype != "fuse.rubinofs" {
		return "", fmt.Errorf("mountpoint %s is a dead %s mount (ENOTCONN), not rubinofs: clear it with `rubinofs unmount %s` or `umount -l %s`", abs, fstype, abs, abs)
	}
	if err := unmount(abs, true); err != nil {
		return "", fmt.Errorf("clearing the dead mount at %s: %w", abs, err)
	}
	return fmt.Sprintf("cleared a dead rubinofs mount at %s (its daemon was gone: ENOTCONN)", abs), nil
}

// deadProbeTimeout bounds DeadMount's statfs: a daemon that is alive but
// does not answer within it is taken for alive (and busy), so that
// `rubinofs unmount` never hangs on a stuck server.
const deadProbeTimeout = 5 * time.Second

// DeadMount reports whether the mount at the absolute path abs is a FUSE
// mount whose server is gone (the kernel answers ENOTCONN), and its file
// system type ("" when abs is not in /proc/self/mountinfo). stat(2) may be
// answered from the attribute cache; statfs(2) never is, so DeadMount asks
// statfs (at most deadProbeTimeout: a stuck server counts as alive) and
// also accepts an ENOTCONN from stat.
func DeadMount(abs string) (fstype string, dead bool) {
	fstype, found := procfs.MountType(abs)
	if _, err := os.Stat(abs); errors.Is(err, syscall.ENOTCONN) {
		return fstype, true
	}
	if !found || !strings.HasPrefix(fstype, "fuse") {
		return fstype, false
	}
	res := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		res <- syscall.Statfs(abs, &st)
	}()
	select {
	case err := <-res:
		return fstype, errors.Is(err, syscall.ENOTCONN)
	case <-time.After(deadProbeTimeout):
		return fstype, false
	}
}

// fuseLogger bridges lg to the *log.Logger go-fuse takes (the server's and
// the node bridge's): with debug the per-request trace as debug records,
// otherwise only anomalies (a failed read or reply, a bad request) as warn.
func fuseLogger(lg *slog.Logger, debug bool) *log.Logger {
	if debug {
		return slog.NewLogLogger(lg.Handler(), slog.LevelDebug)
	}
	return slog.NewLogLogger(lg.Handler(), slog.LevelWarn)
}
