package compact

// Session ids: new random ids, and the resolution of a full id or a unique
// prefix to the full id, the first step of every operation on a session
// (docs/DESIGN.md#compact-short-ids).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// Id lengths, in lowercase hexadecimal digits.
const (
	// IDLen is the length of a full session or summary id: 32 lowercase
	// hex digits (128 random bits).
	IDLen = 32
	// MinPrefix is the shortest id prefix Resolve accepts.
	MinPrefix = 4
	// ShortIDLen is the length of the short ids the CLI shows.
	ShortIDLen = 8
)

// newID returns 32 random lowercase hex digits.
func newID() string {
	var b [IDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// validPrefix reports whether p is 1 to 32 lowercase hex digits.
func validPrefix(p string) bool {
	if p == "" || len(p) > IDLen {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Resolve turns a full session id or a unique prefix of at least MinPrefix
// hex digits into the full id. Upper-case input is accepted. It is the
// first step of every operation on a session, before any message lookup
// (docs/DESIGN.md#compact-short-ids). Errors: ErrBadID for anything that is not
// 4-32 hex digits, ErrNotFound, ErrAmbiguous (with the match count).
func (s *Store) Resolve(ctx context.Context, idOrPrefix string) (string, error) {
	p := strings.ToLower(strings.TrimSpace(idOrPrefix))
	if err := checkPrefix(p, idOrPrefix); err != nil {
		return "", err
	}
	ids, err := queryRows(ctx, s.db, scanString, `SELECT id FROM sessions WHERE id GLOB ? ORDER BY id LIMIT 3`, p+"*")
	if err != nil {
		return "", err
	}
	return oneID(p, ids)
}

// checkPrefix checks a lower-cased prefix p (raw is what was asked, for
// the message): ErrBadID unless it is MinPrefix to IDLen hex digits.
func checkPrefix(p, raw string) error {
	if !validPrefix(p) {
		return fmt.Errorf("%w: %q (want %d to %d hex digits)", ErrBadID, clip(raw, 40), MinPrefix, IDLen)
	}
	if len(p) < MinPrefix {
		return fmt.Errorf("%w: prefix %q is shorter than %d digits", ErrBadID, p, MinPrefix)
	}
	return nil
}

// oneID returns the one id of ids (the matches of prefix p, at most 3):
// ErrNotFound for none, ErrAmbiguous for several.
func oneID(p string, ids []string) (string, error) {
	switch {
	case len(ids) == 0:
		return "", fmt.Errorf("%w: %s", ErrNotFound, p)
	case len(ids) == 1:
		return ids[0], nil
	default:
		more := ""
		if len(ids) > 2 {
			more = ", ..."
		}
		return "", fmt.Errorf("%w: %s matches %s, %s%s", ErrAmbiguous, p, ids[0], ids[1], more)
	}
}
