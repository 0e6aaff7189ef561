package guard

import (
	"fmt"

	"github.com/rubinofs/rubinofs/sessions"
)

// What a session read at a name that now names another file
// (docs/DESIGN.md#stale-replaced). Records follow file identities, so a
// file replaced by a rename (an atomic save: write a temporary file, rename
// it over the name) leaves the session with no record of the new file at
// all; without this the refusal of its next write would say "unread" to a
// session that did read the file. The tracker therefore remembers, per
// name, the identity its record there follows (byPath) and, once that
// record is forgotten because another session removed the file's last
// name, who removed it (gone). Both only choose the refusal's code and
// message: the decision (refused) is the same either way.

// MaxReplacedNames bounds the names one tracker remembers as replaced
// since it read them (Tracker.gone), in entries: past it an arbitrary
// one is dropped, and a refusal at that name says "unread" again. Each
// entry costs its path and a session name.
const MaxReplacedNames = 4096

// ReplacedOutside is Decision.ReplacedBy for a file replaced outside the
// mount (the watcher reported it, or another mount).
const ReplacedOutside = "outside the mount"

// ReplacedByAnother is Decision.ReplacedBy for a file another session
// replaced when the refused caller may not see that session
// (Caller.MayName).
const ReplacedByAnother = "another session"

// indexPath notes that id's record is at path. Called with t.mu held.
func (t *Tracker) indexPath(id FileID, path string) {
	if t.byPath == nil {
		t.byPath = make(map[string]FileID)
	}
	t.byPath[path] = id
	delete(t.gone, path)
}

// unindexPath drops path from the index when it is id's. Called with
// t.mu held.
func (t *Tracker) unindexPath(id FileID, path string) {
	if cur, ok := t.byPath[path]; ok && cur == id {
		delete(t.byPath, path)
	}
}

// noteGone remembers that the file the session had a record of at path
// lost its last name to session by (not this one). Called with t.mu held.
func (t *Tracker) noteGone(path, by string) {
	if by == t.session {
		delete(t.gone, path)
		return
	}
	if t.gone == nil {
		t.gone = make(map[string]string)
	}
	if _, ok := t.gone[path]; !ok && len(t.gone) >= MaxReplacedNames {
		for k := range t.gone {
			delete(t.gone, k)
			break
		}
	}
	t.gone[path] = by
}

// replacedBy reports whether the session read a file at path that is not
// the file id now there, and who replaced it: a session name,
// sessions.External, or "" when not known. O(1): two map lookups.
func (t *Tracker) replacedBy(path string, id FileID) (by string, replaced bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byPath[path]; ok && old != id {
		if r, ok := t.state[old]; ok && r.path == path {
			if last := t.lastMut(old); last.Seq > r.base {
				by = last.Session
			}
			return by, true
		}
	}
	by, replaced = t.gone[path]
	return by, replaced
}

// replacer is how a refusal names who replaced a file (Decision.ReplacedBy):
// ReplacedOutside, the session's name when the refused caller may see it
// (may), else ReplacedByAnother; "" when not known.
func replacer(by string, may func(string) bool) string {
	switch {
	case by == "":
		return ""
	case by == sessions.External:
		return ReplacedOutside
	case may != nil && may(by):
		return "session " + by
	}
	return ReplacedByAnother
}

// judgeReplaced is judge's answer for a file tr's session has no record of:
// stale when the session read another file at t's name since replaced
// (docs/DESIGN.md#stale-replaced), else unread.
func judgeReplaced(tr *Tracker, op Op, t Target, may func(string) bool) Decision {
	by, ok := tr.replacedBy(t.Path, t.Stat.ID)
	if !ok {
		return Decision{Code: CodeUnread, Message: fmt.Sprintf("refusing to %s %s: read it first", op.verb(), t.Path)}
	}
	who := replacer(by, may)
	how := "was replaced"
	if who != "" {
		if who == ReplacedOutside {
			how += " " + who
		} else {
			how += " by " + who
		}
	}
	return Decision{Code: CodeStale, ReplacedBy: who,
		Message: fmt.Sprintf("%s %s since this session read it: read it again before you %s it", t.Path, how, op.verb())}
}
