package journal

// The per-log path table: a record names a path by an id, and a path is
// defined once per log as (its directory's id, its name), so a deep tree
// costs linear, not quadratic, space (docs/DESIGN.md#journal-paths).

import (
	"fmt"
	"strings"
)

// idOf is the id of a path field of a raw line: pid when set, else the
// interned path of an older-format line ("" is the root, 0).
func (t *pathTable) idOf(pid uint64, path string) uint64 {
	if pid != 0 || path == "" {
		return pid
	}
	return t.intern(path)
}

// PathDef defines path id I of a log as the entry N of directory D (0:
// the workspace root). A record carries the definitions of the ids it is
// the first to use, before any use (parents before children). A name
// that is not valid UTF-8 (a Linux name is any bytes but '/' and NUL)
// cannot pass through a JSON string unchanged: X then holds its bytes in
// hex, N the name with each bad byte as U+FFFD for people, and a reader
// takes X (docs/DESIGN.md#journal-paths).
type PathDef struct {
	I uint64 `json:"i"`
	D uint64 `json:"d"`
	N string `json:"n"`
	X string `json:"x,omitempty"`
}

// defOf is the definition of id as node n: with X when n's name is not
// valid UTF-8.
func defOf(id uint64, n *pathNode) PathDef {
	d := PathDef{I: id, D: n.dir}
	d.N, d.X = jsonName(n.name)
	return d
}

// pathNode is one path of the table: its directory's id, its name, its
// depth (1 below the root) and whether its PathDef is in the log file.
type pathNode struct {
	dir     uint64
	name    string
	depth   int32
	written bool
	defined bool // a slot in use (ids may have gaps)
}

// pathKey names a node by its directory and name.
type pathKey struct {
	dir  uint64
	name string
}

// pathTable maps a log's path ids to paths and back. Id 0 is the root
// (the path ""). Memory is one node per distinct path component chain,
// linear in the bytes of the names. Not safe for concurrent use: the
// session mutex guards a writer's table, a reader owns its own.
type pathTable struct {
	// byKey is built at the first intern (a reader of a log of ids never
	// needs it: readers hold only nodes).
	byKey map[pathKey]uint64
	nodes []pathNode // by id; nodes[0] is the root
	next  uint64
}

func newPathTable() *pathTable {
	return &pathTable{nodes: []pathNode{{defined: true}}, next: 1}
}

// node returns id's node, or nil for an id the table lacks.
func (t *pathTable) node(id uint64) *pathNode {
	if id >= uint64(len(t.nodes)) || !t.nodes[id].defined {
		return nil
	}
	return &t.nodes[id]
}

// put stores id's node, growing the slice.
func (t *pathTable) put(id uint64, n pathNode) {
	for uint64(len(t.nodes)) <= id {
		t.nodes = append(t.nodes, pathNode{})
	}
	n.defined = true
	t.nodes[id] = n
	if t.byKey != nil {
		t.byKey[pathKey{n.dir, n.name}] = id
	}
}

// keys builds byKey from the nodes (once).
func (t *pathTable) keys() {
	if t.byKey != nil {
		return
	}
	t.byKey = make(map[pathKey]uint64, len(t.nodes))
	for i := 1; i < len(t.nodes); i++ {
		if n := &t.nodes[i]; n.defined {
			t.byKey[pathKey{n.dir, n.name}] = uint64(i)
		}
	}
}

// define adds a definition read from the log (written). An id defined
// twice must name the same path; an unknown directory is an error.
func (t *pathTable) define(d PathDef) error {
	if d.X != "" {
		raw, err := fromJSONName(d.N, d.X)
		if err != nil {
			return fmt.Errorf("journal: bad path definition %d: %w", d.I, err)
		}
		d.N = raw
	}
	if d.I == 0 || d.N == "" || strings.ContainsAny(d.N, "/\x00") {
		return fmt.Errorf("journal: bad path definition %d", d.I)
	}
	if d.I > uint64(len(t.nodes))+1<<20 { // ids are handed out in order
		return fmt.Errorf("journal: path id %d out of range", d.I)
	}
	var depth int32 = 1
	if d.D != 0 {
		p := t.node(d.D)
		if p == nil {
			return fmt.Errorf("journal: path %d defined in unknown directory %d", d.I, d.D)
		}
		depth = p.depth + 1
	}
	if n := t.node(d.I); n != nil {
		if n.dir != d.D || n.name != d.N {
			return fmt.Errorf("journal: path %d defined twice", d.I)
		}
		n.written = true
		return nil
	}
	t.put(d.I, pathNode{dir: d.D, name: d.N, depth: depth, written: true})
	if d.I >= t.next {
		t.next = d.I + 1
	}
	return nil
}

// intern returns the id of path (slash-separated, relative; "" is 0),
// adding in memory the nodes it lacks (not yet written).
func (t *pathTable) intern(path string) uint64 {
	t.keys()
	var id uint64
	var depth int32
	for path != "" {
		name, rest, _ := strings.Cut(path, "/")
		path = rest
		if name == "" {
			continue
		}
		depth++
		k := pathKey{id, name}
		c, ok := t.byKey[k]
		if !ok {
			c = t.next
			t.next++
			t.put(c, pathNode{dir: id, name: strings.Clone(name), depth: depth})
		}
		id = c
	}
	return id
}

// lookup returns the id of path without adding anything; ok is false when
// the table has no such path.
func (t *pathTable) lookup(path string) (uint64, bool) {
	t.keys()
	var id uint64
	for path != "" {
		name, rest, _ := strings.Cut(path, "/")
		path = rest
		if name == "" {
			continue
		}
		c, ok := t.byKey[pathKey{id, name}]
		if !ok {
			return 0, false
		}
		id = c
	}
	return id, true
}

// unwritten appends to defs the definitions of id and its ancestors not
// yet in the log, parents first, skipping those already in defs.
func (t *pathTable) unwritten(id uint64, defs []PathDef) []PathDef {
	var chain []uint64
	for id != 0 {
		n := t.node(id)
		if n == nil || n.written {
			break
		}
		chain = append(chain, id)
		id = n.dir
	}
	for i := len(chain) - 1; i >= 0; i-- {
		c := chain[i]
		dup := false
		for _, d := range defs {
			if d.I == c {
				dup = true
				break
			}
		}
		if !dup {
			defs = append(defs, defOf(c, t.node(c)))
		}
	}
	return defs
}

// markWritten notes that defs reached the log.
func (t *pathTable) markWritten(defs []PathDef) {
	for _, d := range defs {
		if n := t.node(d.I); n != nil {
			n.written = true
		}
	}
}

// path returns the path of id ("" for 0); an unknown id is an error.
func (t *pathTable) path(id uint64) (string, error) {
	if id == 0 {
		return "", nil
	}
	n := t.node(id)
	if n == nil {
		return "", fmt.Errorf("journal: unknown path id %d", id)
	}
	size := 0
	for c := n; ; c = &t.nodes[c.dir] {
		size += len(c.name) + 1
		if c.dir == 0 {
			break
		}
	}
	b := make([]byte, size-1)
	end := len(b)
	for c := n; ; c = &t.nodes[c.dir] {
		copy(b[end-len(c.name):end], c.name)
		end -= len(c.name)
		if c.dir == 0 {
			break
		}
		end--
		b[end] = '/'
	}
	return string(b), nil
}

// below reports whether id names a path strictly below anc.
func (t *pathTable) below(id, anc uint64) bool {
	for id != 0 {
		n := t.node(id)
		if n == nil {
			return false
		}
		id = n.dir
		if id == anc {
			return true
		}
	}
	return false
}

// less orders ids as their paths compare as strings, without building
// the paths: the first differing component decides, a component followed
// by more of the path comparing as itself plus "/".
func (t *pathTable) less(a, b uint64) bool {
	if a == b {
		return false
	}
	// Bring both to the same depth, remembering whether each went up.
	da, db := t.depth(a), t.depth(b)
	ca, cb := a, b // the child of the common ancestor on each side
	moreA, moreB := false, false
	for da > db {
		ca = t.nodes[ca].dir
		da--
		moreA = true
	}
	for db > da {
		cb = t.nodes[cb].dir
		db--
		moreB = true
	}
	if ca == cb { // one is an ancestor of the other: it sorts first
		return moreB
	}
	for t.nodes[ca].dir != t.nodes[cb].dir {
		ca, cb = t.nodes[ca].dir, t.nodes[cb].dir
		moreA, moreB = true, true
	}
	sa, sb := t.nodes[ca].name, t.nodes[cb].name
	if moreA {
		sa += "/"
	}
	if moreB {
		sb += "/"
	}
	return sa < sb
}

func (t *pathTable) depth(id uint64) int32 {
	if id == 0 {
		return 0
	}
	return t.nodes[id].depth
}

// encode returns the line form of rec: every path an id of t (Path
// fields empty), with the definitions of the ids not yet written, which
// the caller marks written once the line is (markWritten).
func (t *pathTable) encode(rec Record) (Record, []PathDef) {
	var defs []PathDef
	id := func(p string) uint64 {
		if p == "" {
			return 0
		}
		i := t.intern(p)
		defs = t.unwritten(i, defs)
		return i
	}
	rec.PID, rec.Path = id(rec.Path), ""
	rec.PID2, rec.Path2 = id(rec.Path2), ""
	if len(rec.Pre) > 0 {
		pre := make([]PreImage, len(rec.Pre))
		for i, p := range rec.Pre {
			p.PID, p.Path = id(p.Path), ""
			p.Target, p.TargetX = jsonName(p.Target)
			pre[i] = p
		}
		rec.Pre = pre
	}
	if len(rec.After) > 0 {
		af := make([]After, len(rec.After))
		for i, a := range rec.After {
			a.PID, a.Path = id(a.Path), ""
			af[i] = a
		}
		rec.After = af
	}
	rec.Defs = defs
	return rec, defs
}

// defineDefs defines rec's Defs in t (Defs zeroed) and returns what
// undoes the definitions it added, for a line found bad afterwards; on an
// error it has undone them itself. A bad line defines nothing.
func (t *pathTable) defineDefs(rec *Record) (undo func(), err error) {
	var added []uint64
	undo = func() {
		for _, i := range added {
			n := &t.nodes[i]
			if t.byKey != nil {
				delete(t.byKey, pathKey{n.dir, n.name})
			}
			*n = pathNode{}
		}
	}
	for _, d := range rec.Defs {
		if t.node(d.I) == nil {
			added = append(added, d.I)
		}
		if err := t.define(d); err != nil {
			undo()
			return nil, err
		}
	}
	rec.Defs = nil
	return undo, nil
}

// defineRaw defines rec's Defs in t and checks that every id rec uses is
// defined, leaving the ids in place (a raw scan). A bad line defines
// nothing.
func (t *pathTable) defineRaw(rec *Record) (err error) {
	undo, err := t.defineDefs(rec)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	check := func(id uint64) {
		if id != 0 && err == nil && t.node(id) == nil {
			err = fmt.Errorf("journal: unknown path id %d", id)
		}
	}
	check(rec.PID)
	check(rec.PID2)
	for i := range rec.Pre {
		check(rec.Pre[i].PID)
	}
	for i := range rec.After {
		check(rec.After[i].PID)
	}
	return err
}

// resolve defines rec's Defs in t and turns its ids back into paths
// (PID, PID2 and Defs zeroed). A line of the older format (paths, no
// ids) passes unchanged. An unknown id is an error.
func (t *pathTable) resolve(rec *Record) (err error) {
	undo, err := t.defineDefs(rec)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil { // a bad line defines nothing
			undo()
		}
	}()
	get := func(id uint64, p *string) {
		if id == 0 || err != nil {
			return
		}
		*p, err = t.path(id)
	}
	get(rec.PID, &rec.Path)
	get(rec.PID2, &rec.Path2)
	rec.PID, rec.PID2 = 0, 0
	for i := range rec.Pre {
		get(rec.Pre[i].PID, &rec.Pre[i].Path)
		rec.Pre[i].PID = 0
		if x := rec.Pre[i].TargetX; x != "" && err == nil {
			rec.Pre[i].Target, err = fromJSONName(rec.Pre[i].Target, x)
			rec.Pre[i].TargetX = ""
		}
	}
	for i := range rec.After {
		get(rec.After[i].PID, &rec.After[i].Path)
		rec.After[i].PID = 0
	}
	return err
}
