// Package ignore decides which workspace paths are exempt from the write
// guard: everything inside a .git directory (git's own bookkeeping, which git
// commands rewrite constantly), paths matching an --exempt glob, and — unless
// the guard is told to cover them — paths git ignores (build output, caches,
// editor swap files: nothing a reviewer would ever see in a diff).
//
// Ignore rules come from the .gitignore file of every directory (loaded
// lazily, the first time a path below that directory is queried, and cached
// until Invalidate) and from .git/info/exclude, with git's precedence and
// negation. Patterns are parsed and matched by go-git's gitignore package;
// the wrapper corrects the places where go-git disagrees with git (each fix
// is documented where it is made and checked against `git check-ignore` by
// the tests). The user's global core.excludesFile (~/.config/git/ignore) and
// other config are deliberately not read: the daemon must exempt the same
// paths whoever runs it, so only rules stored in the workspace count. With
// a Policy, a rule counts only once the mount's owner has accepted it
// (docs/DESIGN.md#exempt-widening).
package ignore

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// excludeFile is git's per-repository exclude file, relative to the root.
const excludeFile = ".git/info/exclude"

// Matcher answers Exempt for one workspace. It caches the parsed rules of each
// ignore file it has read (including "no such file") and is safe for
// concurrent use; Invalidate drops entries so they are re-read.
type Matcher struct {
	root         string
	extra        []string
	guardIgnored bool

	mu      sync.RWMutex
	gen     uint64   // bumped by Invalidate; a load started before it is not cached
	exclude *[]rule  // .git/info/exclude's rules; nil: not read yet
	dirs    dirCache // each directory's .gitignore rules, by path components

	policy *Policy // nil: every rule on disk counts (SetPolicy)

	// memo holds Exempt's answers, by path and isDir, for the rules of
	// generation memoGen (the matcher's gen and the policy's): an answer
	// is a function of the cached rules alone, so it holds until either
	// generation moves, and then the whole memo is dropped. At most
	// memoMax entries and memoMaxBytes bytes of paths (memoBytes); a full
	// memo is dropped too. Guarded by memoMu.
	memoMu    sync.Mutex
	memoGen   [2]uint64
	memo      map[memoKey]bool
	memoBytes int
}

// memoKey is one Exempt question.
type memoKey struct {
	rel   string
	isDir bool
}

// memoMax and memoMaxBytes bound the answers a Matcher keeps: 32,768
// answers, and 4 MiB of the paths they are kept by (a path may be 4 KiB
// long), so a few MiB in all.
const (
	memoMax      = 1 << 15
	memoMaxBytes = 4 << 20
)

// SetPolicy makes the matcher exempt a git-ignored path only when the
// rules accepted by p ignore it too (docs/DESIGN.md#exempt-widening). Call
// it before the first Exempt; several matchers may share one Policy.
func (m *Matcher) SetPolicy(p *Policy) { m.policy = p }

// Policy returns the policy set by SetPolicy, or nil.
func (m *Matcher) Policy() *Policy { return m.policy }

// New builds the exemption matcher over the workspace root directory root (an
// absolute path the daemon can read; ignore files are read from there, never
// through the mount). extra are doublestar globs, workspace-relative and
// slash-separated, that are always exempt (the --exempt flag); a glob exempts
// the paths it matches, so use "dir/**" for a whole subtree. guardIgnored
// makes git-ignored paths guarded, leaving only .git/ and extra exempt. New
// returns an error naming the first malformed glob in extra.
func New(root string, extra []string, guardIgnored bool) (*Matcher, error) {
	for _, g := range extra {
		if !doublestar.ValidatePattern(g) {
			return nil, fmt.Errorf("malformed exempt glob %q", g)
		}
	}
	return &Matcher{
		root:         root,
		extra:        append([]string(nil), extra...),
		guardIgnored: guardIgnored,
	}, nil
}

// Exempt reports whether rel (workspace-relative, slash-separated, no leading
// slash, "" for the root) is exempt: it matches an extra glob, or it has a
// component ".git", or (unless guardIgnored) git would ignore it. A rule file
// that could widen the exemptions is decided apart
// (docs/DESIGN.md#exempt-widening): .git/info/exclude and the root's
// .rubino.toml are never exempt but by an extra glob, and a .gitignore is
// exempt only when its directory is. With a Policy (SetPolicy), git-ignored
// means ignored by the rules on disk and by the accepted ones. isDir says
// whether rel is a directory, which matters for patterns ending in "/". It
// reads each ignore file at most once until Invalidate, keeps its answers
// until the rules change (memo: a repeated question costs a map lookup,
// where working it out walks the rules of every directory above rel), and
// is safe for concurrent use.
func (m *Matcher) Exempt(rel string, isDir bool) bool {
	gen := m.generation()
	key := memoKey{rel, isDir}
	m.memoMu.Lock()
	ans, ok := m.memo[key]
	if ok && m.memoGen != gen {
		ok = false
	}
	m.memoMu.Unlock()
	if ok {
		return ans
	}
	ans = m.exempt(rel, isDir)
	// Kept only when no rule changed while it was worked out: the rules
	// it read are then those of gen.
	if m.generation() == gen {
		m.memoMu.Lock()
		if m.memo == nil || m.memoGen != gen || len(m.memo) >= memoMax || m.memoBytes+len(rel) > memoMaxBytes {
			m.memo, m.memoGen, m.memoBytes = make(map[memoKey]bool), gen, 0
		}
		if _, had := m.memo[key]; !had {
			m.memoBytes += len(rel)
		}
		m.memo[key] = ans
		m.memoMu.Unlock()
	}
	return ans
}

// generation is the matcher's rule generation and its policy's: any
// change to the rules either holds moves one of them.
func (m *Matcher) generation() [2]uint64 {
	m.mu.RLock()
	g := [2]uint64{m.gen, 0}
	m.mu.RUnlock()
	if m.policy != nil {
		g[1] = m.policy.generation()
	}
	return g
}

// exempt is Exempt worked out from the rules.
func (m *Matcher) exempt(rel string, isDir bool) bool {
	for _, g := range m.extra {
		if ok, _ := doublestar.Match(g, rel); ok {
			return true
		}
	}
	switch {
	case rel == "":
		return false
	case rel == excludeFile || rel == ".rubino.toml":
		return false
	case path.Base(rel) == ".gitignore":
		if dir := path.Dir(rel); dir != "." {
			return m.exempt(dir, true)
		}
		return false
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if p == ".git" {
			return true
		}
	}
	if m.guardIgnored {
		return false
	}
	if !ignored(parts, isDir, m.ruleWalk()) {
		return false
	}
	return m.policy == nil || ignored(parts, isDir, func(dir []string, exclude bool) []rule {
		return m.policy.rules(ruleFile(dir, exclude))
	})
}

// ignored reports whether git ignores the path parts by the rules that
// rulesOf gives for each ignore file: rulesOf(dir, false) those of the
// .gitignore in the directory of components dir, rulesOf(nil, true)
// those of .git/info/exclude. The components are the caller's, so a
// cached lookup builds no path string: a path costs its depth, not its
// depth squared in bytes (a 1,000-level tree of 200-byte names built
// 100 MB of strings per query before).
func ignored(parts []string, isDir bool, rulesOf func(dir []string, exclude bool) []rule) bool {
	// git: "It is not possible to re-include a file if a parent directory of
	// that file is excluded." go-git only looks at the full path, so a
	// negation can wrongly re-include a file in an excluded directory. Decide
	// each ancestor first, as git does when it walks the tree (so the
	// .gitignore files inside an excluded directory are never read).
	sets := [][]rule{rulesOf(nil, true)} // lowest precedence first
	for i := 1; i <= len(parts); i++ {
		if rs := rulesOf(parts[:i-1], false); len(rs) > 0 {
			sets = append(sets, rs) // an empty set matches nothing: a level costs the files that have rules
		}
		if excluded(sets, parts[:i], i < len(parts) || isDir) {
			return true
		}
	}
	return false
}

// ruleFile is the workspace-relative path of the ignore file rulesOf
// names by (dir, exclude).
func ruleFile(dir []string, exclude bool) string {
	if exclude {
		return excludeFile
	}
	return joinRel(strings.Join(dir, "/"), ".gitignore")
}

// Invalidate drops the cached rules of relDir's .gitignore ("" or "." is the
// root) and, when relDir is "" or ".git/info", of .git/info/exclude, so a
// changed, created or removed file is re-read by the next Exempt. Safe for
// concurrent use.
func (m *Matcher) Invalidate(relDir string) {
	relDir = strings.Trim(relDir, "/")
	if relDir == "." {
		relDir = ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	var dir []string
	if relDir != "" {
		dir = strings.Split(relDir, "/")
	}
	if n := m.dirs.find(dir); n != nil {
		n.known, n.rules = false, nil
	}
	if relDir == "" || relDir == ".git/info" {
		m.exclude = nil
	}
}

// excluded reports whether the last rule matching p itself (its ancestors are
// the caller's business) excludes it. sets holds the rules of
// .git/info/exclude and then of the .gitignore files from the root down to
// p's directory: gitignore(5)'s precedence, lowest first, and within a file
// the last matching line wins.
func excluded(sets [][]rule, p []string, isDir bool) bool {
	for i := len(sets) - 1; i >= 0; i-- {
		for j := len(sets[i]) - 1; j >= 0; j-- {
			if res := sets[i][j].match(p, isDir); res != gitignore.NoMatch {
				return res == gitignore.Exclude
			}
		}
	}
	return false
}

// ruleWalk returns the rulesOf that exempt gives ignored: the cached rules
// of each ignore file, reading it on a miss (rules). ignored asks for the
// directories from the root down, each one level below the one before, so
// each directory's node is looked up in the one before it: a path of depth
// D costs D map lookups, where a lookup from the root for each costs D
// squared (a 1,500-level tree made each create wait on it). Nodes are never
// removed from the cache, so a node found stays valid.
func (m *Matcher) ruleWalk() func(dir []string, exclude bool) []rule {
	var last *dirCache // the node of the directory asked before, or nil
	lastDepth := -1
	return func(dir []string, exclude bool) []rule {
		if exclude {
			rs, _ := m.rules(dir, true, nil)
			return rs
		}
		var parent *dirCache
		if last != nil && lastDepth == len(dir)-1 {
			parent = last
		}
		rs, n := m.rules(dir, false, parent)
		last, lastDepth = n, len(dir)
		return rs
	}
}

// rules returns the cached rules of the ignore file rulesOf names by
// (dir, exclude) (see ignored), reading it on a miss, and dir's node in
// the cache (nil when it is not cached). parent, if set, is the node of
// dir's parent directory (dir is looked up in it). A missing or
// unreadable file has no rules (git skips it too).
func (m *Matcher) rules(dir []string, exclude bool, parent *dirCache) ([]rule, *dirCache) {
	m.mu.RLock()
	var rs []rule
	var n *dirCache
	ok := false
	if exclude {
		if m.exclude != nil {
			rs, ok = *m.exclude, true
		}
	} else {
		if parent != nil && len(dir) > 0 {
			n = parent.kids[dir[len(dir)-1]]
		} else {
			n = m.dirs.find(dir)
		}
		if n != nil && n.known {
			rs, ok = n.rules, true
		}
	}
	gen := m.gen
	m.mu.RUnlock()
	if ok {
		return rs, n
	}
	// git (since 2.32) does not follow a .gitignore that is a symbolic link;
	// it does follow .git/info/exclude.
	rel := ruleFile(dir, exclude)
	flag := os.O_RDONLY
	if !exclude {
		flag |= syscall.O_NOFOLLOW
	}
	var data []byte
	if f, err := os.OpenFile(filepath.Join(m.root, filepath.FromSlash(rel)), flag, 0); err == nil {
		data, _ = io.ReadAll(f)
		f.Close()
	}
	domain := make([]string, len(dir)) // the cache must not keep the caller's path alive
	for i, d := range dir {
		domain[i] = strings.Clone(d)
	}
	rs = parse(data, domain)
	m.mu.Lock()
	if m.gen == gen { // not invalidated while we read: safe to cache
		if exclude {
			m.exclude = &rs
		} else {
			n = m.dirs.insert(domain)
			n.known, n.rules = true, rs
		}
	}
	m.mu.Unlock()
	return rs, n
}

// dirCache is one directory of the rules cache: its .gitignore's rules
// once known, and its subdirectories by name. Memory is one node per
// directory queried, each name held once. Guarded by Matcher.mu.
type dirCache struct {
	known bool
	rules []rule
	kids  map[string]*dirCache
}

// find returns the node of dir, or nil.
func (c *dirCache) find(dir []string) *dirCache {
	for _, d := range dir {
		if c = c.kids[d]; c == nil {
			return nil
		}
	}
	return c
}

// insert returns the node of dir, making it and its ancestors; dir's
// strings are kept.
func (c *dirCache) insert(dir []string) *dirCache {
	for _, d := range dir {
		k := c.kids[d]
		if k == nil {
			if c.kids == nil {
				c.kids = map[string]*dirCache{}
			}
			k = &dirCache{}
			c.kids[d] = k
		}
		c = k
	}
	return c
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// parse splits an ignore file into rules the way git's
// add_patterns_from_buffer does (parseLines).
func parse(data []byte, domain []string) []rule {
	var rs []rule
	for _, line := range parseLines(data) {
		if r, ok := newRule(line, domain); ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// parseLines returns the rule lines of an ignore file: a UTF-8 BOM is
// skipped, a CR before LF is dropped, lines starting with "#" are comments,
// unescaped trailing spaces are removed, and lines left empty are skipped.
func parseLines(data []byte) []string {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") {
			continue
		}
		if line = trimTrailingSpaces(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// trimTrailingSpaces ports git's trim_trailing_spaces: "Trailing spaces are
// ignored unless they are quoted with backslash". go-git keeps all spaces
// when the line ends in "\ " and trims them all otherwise, which breaks
// "a\  " (escaped space then a plain one) and "a\\ " (escaped backslash).
func trimTrailingSpaces(s string) string {
	end := -1 // start of the current run of unescaped trailing spaces
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if end < 0 {
				end = i
			}
		case '\\':
			i++
			fallthrough
		default:
			end = -1
		}
	}
	if end >= 0 {
		return s[:end]
	}
	return s
}

// rule is one ignore-file line: the go-git pattern plus its shape, which
// match needs to make go-git's answer exact.
type rule struct {
	pat   gitignore.Pattern
	depth int      // components in the directory holding the ignore file
	base  bool     // no slash but a trailing one: matches a name at any depth
	segs  int      // slash-separated segments (leading "/" dropped)
	segv  []string // those segments, as fnmatch rewrote them (SameBelow)
	star  int      // index of the only "**" segment; -1 none, -2 several
}

func newRule(line string, domain []string) (rule, bool) {
	neg, body, dir := "", line, ""
	if strings.HasPrefix(body, "!") {
		neg, body = "!", body[1:]
	}
	if strings.HasSuffix(body, "/") {
		dir, body = "/", body[:len(body)-1]
	}
	if body == "" {
		return rule{}, false
	}
	body = fnmatch(body)
	// git: "A trailing /** matches everything inside" (not the directory
	// itself). go-git's "**" also matches zero components, so "x/**" would
	// match x; "x/**/*" means one or more components, as git does.
	if strings.HasSuffix(body, "/**") {
		body += "/*"
	}
	r := rule{depth: len(domain), base: !strings.Contains(body, "/"), star: -1}
	segs := strings.Split(strings.TrimPrefix(body, "/"), "/")
	r.segs, r.segv = len(segs), segs
	for i, s := range segs {
		if s == "**" && r.star == -1 {
			r.star = i
		} else if s == "**" {
			r.star = -2
		}
	}
	r.pat = gitignore.ParsePattern(neg+body+dir, domain)
	return r, true
}

// posixClass maps git's "[:name:]" classes (ASCII, as in the C locale) to
// ranges Go understands.
var posixClass = map[string]string{"alnum": "0-9A-Za-z", "alpha": "A-Za-z",
	"blank": " \t", "cntrl": "\x00-\x1f\x7f", "digit": "0-9", "graph": "!-~",
	"lower": "a-z", "print": " -~", "punct": "!-/:-@[-`{-~", "space": " \t-\r",
	"upper": "A-Z", "xdigit": "0-9A-Fa-f"}

// fnmatch rewrites wildmatch syntax that git accepts but Go's filepath.Match
// (go-git's per-segment matcher) rejects or reads differently:
//   - "[!a]" negates a class in git; Go spells it "[^a]".
//   - "]" first in a class and "-" first or last are literal in git; Go
//     needs them escaped. "[:digit:]" and the other POSIX classes become
//     ranges.
//   - git: "Other consecutive asterisks are considered regular asterisks";
//     go-git fails any segment containing "**" but "**" itself, so a run of
//     "*" becomes "**" when it is a whole segment and "*" otherwise.
func fnmatch(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i++
		case c == '*':
			j := i
			for j < len(s) && s[j] == '*' {
				j++
			}
			if j-i > 1 && (i == 0 || s[i-1] == '/') && (j == len(s) || s[j] == '/') {
				b.WriteString("**")
			} else {
				b.WriteByte('*')
			}
			i = j - 1
		case c == '[':
			i = class(&b, s, i)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// class writes the Go form of the class opening at s[i] and returns the index
// of its closing "]"; an unclosed "[" is copied as is (neither git nor Go
// matches it).
func class(b *strings.Builder, s string, i int) int {
	var c strings.Builder
	c.WriteByte('[')
	j := i + 1
	if j < len(s) && (s[j] == '!' || s[j] == '^') {
		c.WriteByte('^')
		j++
	}
	for first := j; j < len(s) && (s[j] != ']' || j == first); j++ {
		switch {
		case s[j] == '\\' && j+1 < len(s):
			c.WriteString(s[j : j+2])
			j++
		case strings.HasPrefix(s[j:], "[:") && strings.Contains(s[j+2:], ":]"):
			k := strings.Index(s[j+2:], ":]")
			c.WriteString(posixClass[s[j+2:j+2+k]])
			j += k + 3
		case s[j] == ']' || s[j] == '-' && (j == first || j+1 < len(s) && s[j+1] == ']'):
			c.WriteString("\\" + s[j:j+1])
		default:
			c.WriteByte(s[j])
		}
	}
	if j == len(s) {
		b.WriteByte('[')
		return i
	}
	b.WriteString(c.String() + "]")
	return j
}

// match reports whether r matches the path p itself, p being below r's
// directory. go-git's Pattern.Match also reports a match when the pattern only
// matches an ancestor of p (it matches a name in any component, and a glob
// against a prefix), so "!dir/" would re-include everything below dir. Git
// matches p alone (ancestors are Exempt's business), so go-git gets a probe
// path holding exactly what the pattern has to consume.
func (r *rule) match(p []string, isDir bool) gitignore.MatchResult {
	rest := p[r.depth:]
	probe := rest
	switch {
	case r.base: // git: no slash ⇒ match against the name only
		probe = rest[len(rest)-1:]
	case r.star == -1: // no "**": one segment per component
		if len(rest) != r.segs {
			return gitignore.NoMatch
		}
	case r.star >= 0:
		// One "**" takes the middle; head and tail are one segment per
		// component. Cutting the middle also stops go-git's greedy "**"
		// from stopping at the first match ("a/**/b/c" vs a/b/x/b/c).
		head, tail := r.star, r.segs-r.star-1
		if len(rest) < head+tail {
			return gitignore.NoMatch
		}
		probe = append(rest[:head:head], rest[len(rest)-tail:]...)
	} // several "**": go-git's own (greedy, prefix) matching; a known gap
	return r.pat.Match(append(p[:r.depth:r.depth], probe...), isDir)
}
