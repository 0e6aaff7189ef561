package fusefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountOptions are the kernel-facing options of a mount.
type MountOptions struct {
	// Options are FUSE mount options as given to -o (allow_other, ro, ...).
	// default_permissions is always added: the kernel checks permissions as
	// on the backing filesystem.
	Options []string
	// EntryTimeout, AttrTimeout and NegativeTimeout are the kernel cache
	// timeouts for backing nodes.
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration
	// KeepCache keeps the page cache across opens (only safe when an
	// invalidation source, the watcher, tells the kernel about external
	// changes).
	KeepCache bool
	// Debug logs every FUSE request.
	Debug bool
	// AllowNonEmpty mounts over a non-empty directory (in-place mounts).
	AllowNonEmpty bool
}

// Mount mounts f at mountpoint and returns the running server. As root it
// mounts directly (mount(2)); otherwise go-fuse uses fusermount3, from
// Debian's fuse3 package. The mount is up when Mount returns.
func (f *FS) Mount(mountpoint string, o MountOptions) (*fuse.Server, error) {
	if err := CheckMountpoint(mountpoint, o.AllowNonEmpty); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("no /dev/fuse: %w (load the fuse module, or run the container with --device /dev/fuse)", err)
	}
	mo := fuse.MountOptions{
		FsName:            f.cfg.Workspace,
		Name:              "rubinofs",
		DirectMount:       os.Geteuid() == 0,
		EnableLocks:       true,
		Debug:             o.Debug,
		MaxWrite:          1 << 20,
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
		Options:           []string{"default_permissions"},
	}
	for _, opt := range o.Options {
		switch opt {
		case "":
		case "allow_other":
			mo.AllowOther = true
		case "default_permissions":
		default:
			mo.Options = append(mo.Options, opt)
		}
	}
	f.keepCache = o.KeepCache
	opts := &fs.Options{
		MountOptions:    mo,
		EntryTimeout:    &o.EntryTimeout,
		AttrTimeout:     &o.AttrTimeout,
		NegativeTimeout: &o.NegativeTimeout,
		Logger:          f.log,
	}
	server, err := fs.Mount(mountpoint, f.root, opts)
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", mountpoint, err)
	}
	f.SetServer(server)
	return server, nil
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
	if mounted, _ := IsMountpoint(mountpoint); mounted {
		return fmt.Errorf("mountpoint %s is already a mount point: unmount it first", mountpoint)
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

// IsMountpoint reports whether path is listed as a mount point in
// /proc/self/mountinfo.
func IsMountpoint(path string) (bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && unescapeMount(fields[4]) == abs {
			return true, nil
		}
	}
	return false, nil
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo.
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// Unmount unmounts a rubinofs mount at mountpoint, also a dead one whose
// daemon is gone (ENOTCONN), which it detaches lazily. A busy live mount is
// an error naming EBUSY. As non-root it uses fusermount3 -u.
func Unmount(mountpoint string) error {
	if os.Geteuid() != 0 {
		out, err := exec.Command("fusermount3", "-u", mountpoint).CombinedOutput()
		if err != nil {
			return fmt.Errorf("fusermount3 -u %s: %v: %s", mountpoint, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	_, statErr := os.Stat(mountpoint)
	dead := errors.Is(statErr, syscall.ENOTCONN)
	flags := 0
	if dead {
		flags = syscall.MNT_DETACH
	}
	if err := syscall.Unmount(mountpoint, flags); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("unmount %s: busy (EBUSY): files are open or a process has its cwd there", mountpoint)
		}
		if errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("unmount %s: not a mount point", mountpoint)
		}
		return fmt.Errorf("unmount %s: %w", mountpoint, err)
	}
	return nil
}
