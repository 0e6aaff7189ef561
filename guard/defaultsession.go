package guard

import (
	"strconv"
	"strings"
)

// DefaultSessionFor is the default session of a caller with uid that is in
// no registered session (docs/DESIGN.md#sessions): DefaultSession for the
// mount owner's uid mountOwner, "default-U" (U in decimal) for any other
// uid, so no uid lands in another uid's default session.
func DefaultSessionFor(uid, mountOwner uint32) string {
	if uid == mountOwner {
		return DefaultSession
	}
	return DefaultSession + "-" + strconv.FormatUint(uint64(uid), 10)
}

// DefaultSessionUID is DefaultSessionFor's inverse: the uid whose default
// session name is, and ok false when name is no default session name.
func DefaultSessionUID(name string, mountOwner uint32) (uid uint32, ok bool) {
	if name == DefaultSession {
		return mountOwner, true
	}
	s, found := strings.CutPrefix(name, DefaultSession+"-")
	if !found || s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || uint32(n) == mountOwner {
		return 0, false
	}
	return uint32(n), true
}
