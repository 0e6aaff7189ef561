package sessions

import (
	"strconv"
	"strings"
)

// DefaultFor returns the session of a caller with uid uid that is
// under no registered session root: Default ("default") for the
// mount's owner mountOwner, "default-U" (U the uid in decimal) for any
// other uid. Each is a session of its own with its own tracker, owned by
// its uid, so a caller outside every session never acts with another
// uid's reads (docs/DESIGN.md#sessions). Pure; safe for concurrent use.
func DefaultFor(uid, mountOwner uint32) string {
	if uid == mountOwner {
		return Default
	}
	return Default + "-" + strconv.FormatUint(uint64(uid), 10)
}

// DefaultUID reports whether name is a default session (the one of
// callers outside every session, DefaultFor) and whose: mountOwner
// for Default, U for "default-U" written as DefaultFor
// writes it (no sign, no leading zero, at most 2^32-1). Pure; safe for
// concurrent use.
func DefaultUID(name string, mountOwner uint32) (uid uint32, ok bool) {
	if name == Default {
		return mountOwner, true
	}
	rest, found := strings.CutPrefix(name, Default+"-")
	if !found || rest == "" || (rest[0] == '0' && len(rest) > 1) {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 32)
	if err != nil || rest[0] < '0' || rest[0] > '9' {
		return 0, false
	}
	return uint32(n), true
}
