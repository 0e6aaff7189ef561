package ignore

import (
	"path"
	"strings"
)

// SameBelow reports whether, by the rules alone and without reading the
// tree, every path below the directory dst is exempt exactly when the same
// path below src is: the question a rename of src to dst through the
// mount asks before it lets guarded files below it keep their guard
// (docs/DESIGN.md#exempt-widening). It is true when src and dst are in
// one directory (the ignore files above them are the same), no extra glob
// is set, and every rule of those ignore files and of .git/info/exclude,
// on disk and as accepted, matches nothing below dst that it would not
// match below src (notBelow: a name rule such as "*.o" or "build/", or an
// anchored rule that cannot reach below dst, such as "/dist" or
// ".vscode/*" for a dst named src2), and the two
// names are ignored alike by each set (on disk, accepted); whether dst
// itself is exempt is the caller's to ask (Exempt). False means not known:
// the caller reads the tree. It reads the ignore files above src that are
// not cached yet. Safe for concurrent use.
func (m *Matcher) SameBelow(src, dst string) bool {
	if len(m.extra) > 0 || path.Dir(src) != path.Dir(dst) {
		return false
	}
	if m.guardIgnored {
		return true // only .git/ and the globs exempt, and there are no globs
	}
	var parts []string
	if dir := path.Dir(src); dir != "." {
		parts = strings.Split(dir, "/")
	}
	dp := strings.Split(dst, "/")
	names := func(rs []rule) bool {
		for i := range rs {
			if !notBelow(&rs[i], dp) {
				return false
			}
		}
		return true
	}
	walk := m.ruleWalk()
	accepted := func(dir []string, exclude bool) []rule {
		if m.policy == nil {
			return nil
		}
		return m.policy.rules(ruleFile(dir, exclude))
	}
	if !names(walk(nil, true)) || !names(accepted(nil, true)) {
		return false
	}
	for i := 0; i <= len(parts); i++ {
		if !names(walk(parts[:i], false)) || !names(accepted(parts[:i], false)) {
			return false
		}
	}
	// Under name rules a path below either name is ignored when the name
	// itself is or a component below it is, by each set of rules alone.
	// A path is exempt when both sets ignore it, so the two names must
	// get one answer from each set, not only from both together: the
	// rules on disk may ignore dst and the accepted ones not, while the
	// accepted ones ignore a file below it ("build/" accepted, "*" and
	// "!build/" written since: dst is not exempt, dst/x.c would be).
	if m.policy != nil {
		sp := strings.Split(src, "/")
		if ignored(sp, true, m.ruleWalk()) != ignored(dp, true, m.ruleWalk()) ||
			ignored(sp, true, accepted) != ignored(dp, true, accepted) {
			return false
		}
	}
	return true
}

// notBelow reports whether r gives every path below the directory dst
// (components dp) the answer it gives the same path below any other name
// in dst's directory: a name rule ("*.o", "build/": no slash but a
// trailing one) matches a name at any depth alike; an anchored rule
// without "**" ("/dist", ".vscode/*", "docs/_build/") matches paths of
// exactly its file's depth plus its segments, so it matches nothing below
// dst when that is no deeper than dst, or when one of its segments does
// not match dst's component at that depth. Any other rule may.
func notBelow(r *rule, dp []string) bool {
	if r.base {
		return true
	}
	if r.star != -1 || r.depth > len(dp) {
		return false
	}
	if r.depth+r.segs <= len(dp) {
		return true
	}
	rel := dp[r.depth:]
	for i, seg := range r.segv {
		if i >= len(rel) {
			break
		}
		if ok, err := path.Match(seg, rel[i]); err == nil && !ok {
			return true
		}
	}
	return false
}
