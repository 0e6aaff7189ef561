package ctltree

import (
	"strings"
	"unicode/utf8"
)

// MaxReason bounds one readable reason, in bytes, as a handle's
// "error: REASON" line and as an entry of /.rubino/errors, so a hostile
// input quoted in a reason cannot grow either.
const MaxReason = 1024

// Clip cuts a reason (or an input quoted in one) to MaxReason bytes on a
// UTF-8 boundary, marking a cut with "…", and folds its newlines to "\n"
// and "\r" escapes, so it stays one line of the handle and of the log.
// Pure; safe for concurrent use.
func Clip(s string) string {
	if len(s) > 2*MaxReason {
		s = s[:2*MaxReason] // bound the folding below
	}
	s = strings.NewReplacer("\n", "\\n", "\r", "\\r").Replace(s)
	if len(s) > MaxReason {
		n := MaxReason
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}
