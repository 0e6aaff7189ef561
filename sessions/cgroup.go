package sessions

// The cgroup v2 hierarchy, as session roots see it (docs/DESIGN.md#cgroup-sessions):
// where it is mounted, which cgroup a process is in, and whether a cgroup
// still exists.

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/rubinofs/rubinofs/internal/procfs"
)

// CgroupPath cleans a cgroup path as a session names it: the path of the
// cgroup in the v2 hierarchy as /proc/<pid>/cgroup shows it ("/" for the
// root, "/system.slice/docker-ID.scope"). A path under the hierarchy's
// mount point (mnt, "" for none) is taken relative to it, so
// "/sys/fs/cgroup/a/b" and "/a/b" name the same cgroup. Errors: a path that
// is not absolute or climbs out with "..".
func CgroupPath(p, mnt string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("cgroup path %q is not absolute", clip(p))
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("cgroup path %q climbs out with ..", clip(p))
		}
	}
	p = path.Clean(p)
	if mnt != "" && mnt != "/" {
		if p == mnt {
			return "/", nil
		}
		if rest, ok := strings.CutPrefix(p, mnt+"/"); ok {
			return "/" + rest, nil
		}
	}
	return p, nil
}

// clip cuts s to 80 bytes for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// cgroupDir is the directory of cgroup cg under the hierarchy mounted at mnt.
func cgroupDir(mnt, cg string) string {
	if cg == "/" {
		return mnt
	}
	return filepath.Join(mnt, cg)
}

// parseProcCgroup returns the v2 path of a /proc/<pid>/cgroup text: its
// "0::PATH" line ("" when it has none: no v2 hierarchy, or the process is
// gone). A path the kernel marks " (deleted)" (the cgroup was removed while
// the process is a zombie in it) is returned without the mark.
func parseProcCgroup(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return strings.TrimSuffix(p, " (deleted)")
		}
	}
	return ""
}

// procCgroup reads the v2 cgroup of thread tid from procDir (unbounded:
// callers run it inside procfs.Bounded).
func procCgroup(procDir string, tid uint32) (string, error) {
	var buf [1024]byte
	b, err := readSmall(fmt.Sprintf("%s/%d/cgroup", procDir, tid), buf[:])
	if err != nil {
		return "", err
	}
	p := parseProcCgroup(b)
	if p == "" {
		return "", procfs.ErrNoCgroup2
	}
	return p, nil
}

// cgroupWithin reports whether cgroup cg is root or below it.
func cgroupWithin(cg, root string) bool {
	return cg == root || root == "/" || strings.HasPrefix(cg, root+"/")
}

// ValidCgroupGlob checks one --session-cgroups pattern: a doublestar glob
// of absolute cgroup paths ("/system.slice/docker-*.scope",
// "/kubepods*/**").
func ValidCgroupGlob(g string) error {
	if !strings.HasPrefix(g, "/") {
		return fmt.Errorf("cgroup glob %q is not absolute (cgroup paths start with /)", clip(g))
	}
	if !doublestar.ValidatePattern(g) {
		return fmt.Errorf("cgroup glob %q is not a valid pattern", clip(g))
	}
	return nil
}

// autoSessionName names the automatic session of cgroup cg after its last
// path element: a ".scope" or ".slice" suffix is dropped, then a prefix up
// to the last '-' when what follows is a hex id of 12 digits or more
// ("docker-ID.scope", "libpod-ID.scope", "cri-containerd-ID.scope" give
// ID); characters a session name may not hold become '_', and the name is
// clipped to MaxName bytes. It may still be invalid (a reserved
// name): the caller checks.
func autoSessionName(cg string) string {
	el := path.Base(cg)
	for _, suf := range []string{".scope", ".slice"} {
		el = strings.TrimSuffix(el, suf)
	}
	if i := strings.LastIndexByte(el, '-'); i >= 0 && isHexID(el[i+1:]) {
		el = el[i+1:]
	}
	b := []byte(el)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > MaxName {
		b = b[:MaxName]
	}
	return string(b)
}

// isHexID reports whether s is 12 or more hex digits (a container id).
func isHexID(s string) bool {
	if len(s) < 12 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
