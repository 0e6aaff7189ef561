package ignore

// Acceptance of ignore rules (docs/DESIGN.md#exempt-widening): a rule
// exempts a path only once the mount's owner has accepted it. A Matcher
// with a Policy answers Exempt true only when both the rules on disk and
// the accepted rules exempt the path, so removing a rule (tightening)
// applies at once and adding one (widening) waits for Reload.

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxSpans bounds the mounted periods a Policy remembers; older ones are
// merged into one covering both (a longer span only holds more back).
const maxSpans = 64

// maxMoved bounds the renamed directories remembered; past it every rule
// file not yet loaded waits for Reload.
const maxMoved = 1024

// IsRuleFile reports whether the workspace-relative path rel is a file
// whose content decides what git ignores: a .gitignore in any directory,
// or .git/info/exclude.
func IsRuleFile(rel string) bool {
	return rel == excludeFile || path.Base(rel) == ".gitignore"
}

// Policy holds the ignore rules the mount's owner has accepted, for the
// Matchers of one workspace (SetPolicy), and persists them in a state file
// so that a remount accepts nothing a session wrote (docs/DESIGN.md#exempt-widening).
//
// The accepted rules of a rule file are loaded the first time a Matcher
// consults it: its content on disk, unless its ctime (or, for a symbolic
// link, the link's) falls in a span during which a mount served the
// workspace since the last acceptance, or it lies below a directory renamed
// through the mount: then it has no accepted rules. Pin, called before the
// mount changes a rule file, loads it first, so what it held before keeps
// counting. External accepts an edit made outside the mount. Safe for
// concurrent use; no method waits on anything but the disk.
type Policy struct {
	root  string
	state string // the state file; "" keeps nothing across mounts

	saveMu sync.Mutex // serialises writes of the state file
	mu     sync.RWMutex
	gen    uint64 // bumped by Pin, Moved, External, Reload: a load started before is not cached
	files  map[string]*accepted
	spans  []span
	moved  []string // directories renamed through the mount since acceptance; "" = all
	at     time.Time
	err    error // the last failure to write the state file
}

// accepted is the accepted content of one rule file.
type accepted struct {
	rules   []rule
	lines   []string // the rule lines, normalised (parseLines)
	touched bool     // changed through the mount since acceptance: only Reload accepts it
	keep    bool     // persisted: not derivable from disk again
	held    bool     // loaded as changed since acceptance: its content on disk waits for Reload
}

// span is a period, in Unix nanoseconds, during which a mount served the
// workspace; To 0 is open (this mount, or one whose daemon died).
type span struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

func (s span) holds(ns int64) bool {
	// One second past the end: a file system's coarse clock may stamp
	// a change just before unmount a little late.
	return ns >= s.From && (s.To == 0 || ns <= s.To+int64(time.Second))
}

// policyState is the state file's JSON.
type policyState struct {
	AcceptedAt time.Time            `json:"accepted_at"`
	Spans      []span               `json:"spans"`
	Moved      []string             `json:"moved,omitempty"`
	Files      map[string]stateFile `json:"files,omitempty"`
}

type stateFile struct {
	Lines   []string `json:"lines"`
	Touched bool     `json:"touched,omitempty"`
}

// NewPolicy returns the policy of the workspace reached at root (read
// directly, never through the mount), kept in the file state ("" for
// none: every mount then starts from what is on disk). A missing state
// file means a first mount: every rule on disk is accepted. It opens a
// span for this mount and writes the state file; Close ends the span. An
// unreadable or malformed state file is an error naming it.
func NewPolicy(root, state string) (*Policy, error) {
	now := time.Now()
	p := &Policy{root: root, state: state, files: map[string]*accepted{}, at: now}
	if state != "" {
		b, err := os.ReadFile(state)
		switch {
		case err == nil:
			var st policyState
			if err := json.Unmarshal(b, &st); err != nil {
				return nil, errors.New("exemption policy " + state + ": " + err.Error())
			}
			p.at, p.spans, p.moved = st.AcceptedAt, st.Spans, st.Moved
			for rel, f := range st.Files {
				p.files[rel] = newAccepted(rel, f.Lines, f.Touched, true)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, errors.New("exemption policy: " + err.Error())
		}
	}
	p.spans = append(p.spans, span{From: now.UnixNano()})
	for len(p.spans) > maxSpans {
		merged := span{From: p.spans[0].From, To: p.spans[1].To}
		if p.spans[0].To == 0 {
			merged.To = 0
		}
		p.spans = append([]span{merged}, p.spans[2:]...)
	}
	return p, p.save()
}

func newAccepted(rel string, lines []string, touched, keep bool) *accepted {
	return &accepted{rules: parse([]byte(strings.Join(lines, "\n")), domainOf(rel)), lines: lines, touched: touched, keep: keep}
}

// domainOf is the directory components a rule file's patterns are
// relative to: none for .git/info/exclude, else its directory's.
func domainOf(rel string) []string {
	dir := path.Dir(rel)
	if rel == excludeFile || dir == "." {
		return nil
	}
	return strings.Split(dir, "/")
}

// generation is the policy's gen: it moves whenever the accepted rules
// may have changed (Pin, Moved, External, Reload).
func (p *Policy) generation() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.gen
}

// rules returns the accepted rules of the rule file rel, loading them on
// a miss (see Policy).
func (p *Policy) rules(rel string) []rule {
	p.mu.RLock()
	a, gen := p.files[rel], p.gen
	p.mu.RUnlock()
	if a != nil {
		return a.rules
	}
	a = p.load(rel)
	p.mu.Lock()
	if b := p.files[rel]; b != nil {
		a = b
	} else if p.gen == gen {
		p.files[rel] = a
	}
	p.mu.Unlock()
	return a.rules
}

// load reads rel's content as accepted: empty when it changed during a
// span or lies below a moved directory.
func (p *Policy) load(rel string) *accepted {
	data, ctime, ok := readRuleFile(p.root, rel)
	if !ok {
		return &accepted{}
	}
	p.mu.Lock()
	held := p.movedLocked(rel)
	for _, s := range p.spans {
		held = held || s.holds(ctime)
	}
	p.mu.Unlock()
	if held {
		return &accepted{held: true}
	}
	return newAccepted(rel, parseLines(data), false, false)
}

// readRuleFile reads rel under root as git would (a .gitignore that is a
// symbolic link is not followed) and returns its content and the later of
// its own and its link's ctime, in Unix nanoseconds; ok is false when
// there is nothing to read.
func readRuleFile(root, rel string) (data []byte, ctime int64, ok bool) {
	name := filepath.Join(root, filepath.FromSlash(rel))
	var lst syscall.Stat_t
	if syscall.Lstat(name, &lst) != nil {
		return nil, 0, false
	}
	flag := os.O_RDONLY
	if rel != excludeFile {
		flag |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(name, flag, 0)
	if err != nil {
		return nil, 0, false
	}
	defer f.Close()
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, 0, false
	}
	data, _ = io.ReadAll(io.LimitReader(f, 1<<20))
	return data, max(lst.Ctim.Nano(), st.Ctim.Nano()), true
}

// Held reports whether the time ns (Unix nanoseconds) falls in a span
// during which a mount served the workspace since the last acceptance:
// something born then was made while mounted, not accepted by the owner
// (docs/DESIGN.md#tool-trees). Safe for concurrent use.
func (p *Policy) Held(ns int64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, s := range p.spans {
		if s.holds(ns) {
			return true
		}
	}
	return false
}

// movedLocked reports whether rel lies below a directory renamed through
// the mount since acceptance. Called with mu held.
func (p *Policy) movedLocked(rel string) bool {
	for _, d := range p.moved {
		if d == "" || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// Pin is called before the mount changes the rule files among rels (other
// paths are ignored): their accepted rules are loaded now, from the
// content still on disk, and only Reload accepts what the change writes.
// It writes the state file when a file is pinned for the first time.
func (p *Policy) Pin(rels ...string) {
	changed := false
	for _, rel := range rels {
		if !IsRuleFile(rel) {
			continue
		}
		p.mu.Lock()
		a := p.files[rel]
		p.mu.Unlock()
		if a == nil {
			a = p.load(rel)
		}
		p.mu.Lock()
		if b := p.files[rel]; b != nil {
			a = b
		}
		if !a.touched || !a.keep {
			a.touched, a.keep = true, true
			// Without accepted lines the state file needs no entry: after a
			// remount the file's ctime, in this mount's span, gives none.
			changed = changed || len(a.lines) > 0
		}
		p.files[rel] = a
		p.gen++
		p.mu.Unlock()
	}
	if changed {
		p.saveLogged()
	}
}

// MoveKinds is what the caller of Moved knows of the names of a move
// after it, so Moved need not lstat them. The zero value knows nothing:
// both names are looked at.
type MoveKinds struct {
	// Rename: a plain rename, not an exchange, so from holds nothing now
	// (a directory made there since is new: its rule files' ctimes are
	// too).
	Rename bool
	// ToFile: to holds a regular file, with no rule files below it.
	ToFile bool
	// FromFile: after an exchange, from holds a regular file.
	FromFile bool
}

// Moved is called after the mount renamed from to to, or exchanged them.
// When a directory moved, the rule files below the names that now hold one
// (to, and from after an exchange) have no accepted rules until Reload:
// their ctime did not change, so load could not tell them from files that
// were there. A file's rename needs nothing (Pin, and the ctime the rename
// stamps on it). k says which names are known not to hold a directory
// (each other name costs an lstat).
func (p *Policy) Moved(from, to string, k MoveKinds) {
	var dirs []string
	for _, d := range []struct {
		rel  string
		file bool
	}{{to, k.ToFile}, {from, k.Rename || k.FromFile}} {
		var st syscall.Stat_t
		if !d.file && syscall.Lstat(filepath.Join(p.root, filepath.FromSlash(d.rel)), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			dirs = append(dirs, d.rel)
		}
	}
	if len(dirs) == 0 {
		return // a file: Pin held its old rules, and the rename stamped its ctime
	}
	p.mu.Lock()
	for rel := range p.files {
		if strings.HasPrefix(rel, from+"/") || strings.HasPrefix(rel, to+"/") {
			delete(p.files, rel)
		}
	}
	for _, d := range dirs {
		if !slices.Contains(p.moved, d) {
			p.moved = append(p.moved, d)
		}
	}
	if len(p.moved) > maxMoved {
		p.moved = []string{""}
	}
	p.gen++
	p.mu.Unlock()
	p.saveLogged()
}

// External is called when the watcher saw the rule files rels changed
// outside the mount (other paths are ignored): the owner's own edits, each
// accepted as it is now, unless the mount changed it since the last
// acceptance (then only Reload accepts it). It writes the state file once.
func (p *Policy) External(rels ...string) {
	changed := false
	for _, rel := range rels {
		if !IsRuleFile(rel) {
			continue
		}
		p.mu.Lock()
		a := p.files[rel]
		p.mu.Unlock()
		if a != nil && a.touched {
			continue
		}
		var lines []string
		if data, _, ok := readRuleFile(p.root, rel); ok {
			lines = parseLines(data)
		}
		p.mu.Lock()
		if b := p.files[rel]; b == nil || !b.touched {
			p.files[rel] = newAccepted(rel, lines, false, true)
			p.gen++
			changed = changed || len(lines) > 0 || b != nil && len(b.lines) > 0
		}
		p.mu.Unlock()
	}
	if changed {
		p.saveLogged()
	}
}

// Pending is one rule file whose content differs from its accepted rules.
type Pending struct {
	Path string `json:"path"`
	// Added are rule lines on disk not accepted (they exempt nothing until
	// Reload); Removed are accepted lines no longer on disk (already out
	// of force).
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

// Pending lists the rule files whose rules on disk differ from the
// accepted ones, by path: among those changed through the mount, accepted
// from an edit outside it, or found changed since acceptance (the others
// were accepted as they are on disk). It reads each from disk.
func (p *Policy) Pending() []Pending {
	p.mu.Lock()
	acc := map[string][]string{}
	for rel, a := range p.files {
		if a.keep || a.held {
			acc[rel] = a.lines
		}
	}
	p.mu.Unlock()
	var out []Pending
	for rel, lines := range acc {
		var cur []string
		if data, _, ok := readRuleFile(p.root, rel); ok {
			cur = parseLines(data)
		}
		added, removed := lineDiff(lines, cur)
		if len(added)+len(removed) > 0 {
			out = append(out, Pending{Path: rel, Added: added, Removed: removed})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// lineDiff returns the lines of cur not in acc and those of acc not in cur.
func lineDiff(acc, cur []string) (added, removed []string) {
	for _, l := range cur {
		if !slices.Contains(acc, l) {
			added = append(added, l)
		}
	}
	for _, l := range acc {
		if !slices.Contains(cur, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

// Accepted lists the accepted rule lines of every rule file the policy has
// loaded and that has any, by path.
func (p *Policy) Accepted() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for rel, a := range p.files {
		if len(a.lines) > 0 {
			out[rel] = a.lines
		}
	}
	return out
}

// AcceptedAt is when every rule on disk was last accepted: the first
// mount with this state file, or the last Reload.
func (p *Policy) AcceptedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at
}

// Reload accepts every rule on disk now, the mount owner's act from
// outside every session (the caller checks that). It returns the pending
// files it accepted and the error of writing the state file.
func (p *Policy) Reload() ([]Pending, error) {
	pending := p.Pending()
	now := time.Now()
	p.mu.Lock()
	p.files = map[string]*accepted{}
	p.spans = []span{{From: now.UnixNano()}}
	p.moved = nil
	p.at = now
	p.gen++
	p.mu.Unlock()
	return pending, p.save()
}

// Close ends this mount's span and writes the state file.
func (p *Policy) Close() error {
	p.mu.Lock()
	if n := len(p.spans); n > 0 && p.spans[n-1].To == 0 {
		p.spans[n-1].To = time.Now().UnixNano()
	}
	p.gen++ // a rule file loaded from now on is judged by the closed span
	p.mu.Unlock()
	return p.save()
}

// SaveErr is the last failure to write the state file, nil after a
// successful write.
func (p *Policy) SaveErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *Policy) saveLogged() { _ = p.save() }

// save writes the state file (temporary file, fsync, rename).
func (p *Policy) save() error {
	if p.state == "" {
		return nil
	}
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	p.mu.Lock()
	st := policyState{AcceptedAt: p.at, Spans: slices.Clone(p.spans), Moved: slices.Clone(p.moved), Files: map[string]stateFile{}}
	for rel, a := range p.files {
		if a.keep && len(a.lines) > 0 {
			st.Files[rel] = stateFile{Lines: a.lines, Touched: a.touched}
		}
	}
	p.mu.Unlock()
	b, err := json.MarshalIndent(st, "", " ")
	if err == nil {
		tmp := p.state + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, p.state)
		}
	}
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	return err
}
