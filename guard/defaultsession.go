package guard

import (
	"strconv"
	"strings"
)

// DefaultSessionFor is the name of the session a caller of uid lands in
// when it is under no registered session root (docs/DESIGN.md#sessions):
// DefaultSession for the mount owner's uid mountOwner, "default-UID"
// (decimal) for any other uid. Pure; safe for concurrent use.
func DefaultSessionFor(uid, mountOwner uint32) string {
	if uid == mountOwner {
		return DefaultSession
	}
	return DefaultSession + "-" + strconv.FormatUint(uint64(uid), 10)
}

// DefaultSessionUID is the inverse of DefaultSessionFor: the uid whose
// default session name is, and ok false when name is no default session
// ("default-" followed by anything but a canonical decimal uid other than
// mountOwner's). Pure; safe for concurrent use.
func DefaultSessionUID(name string, mountOwner uint32) (uid uint32, ok bool) {
	if name == DefaultSession {
		return mountOwner, true
	}
	rest, found := strings.CutPrefix(name, DefaultSession+"-")
	if !found || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 32)
	if err != nil || uint32(n) == mountOwner {
		return 0, false
	}
	return uint32(n), true
}
