package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/tasks"
)

// fileSchema is the schema of a TOML file, made from the options table:
// one struct per section, a pointer field per key (nil: not set; durations
// are strings, parsed with their line), a map for a per-name key. go-toml
// decodes into it strictly, so an unknown key or a value of the wrong type
// is its error, with the line (docs/DESIGN.md#options-table).
var fileSchema = func() reflect.Type {
	type node struct {
		names []string // field order
		leaf  map[string]reflect.StructField
		sub   map[string]*node
	}
	newNode := func() *node { return &node{leaf: map[string]reflect.StructField{}, sub: map[string]*node{}} }
	root := newNode()
	field := func(name string, t reflect.Type, tag string) reflect.StructField {
		return reflect.StructField{Name: "X_" + name, Type: t, Tag: reflect.StructTag(tag)}
	}
	for _, o := range options {
		parts := strings.Split(o.Key, ".")
		if o.perName() {
			parts = parts[:len(parts)-1]
		}
		n := root
		for _, p := range parts[:len(parts)-1] {
			if n.sub[p] == nil {
				n.sub[p] = newNode()
				n.names = append(n.names, p)
			}
			n = n.sub[p]
		}
		name := parts[len(parts)-1]
		tag := fmt.Sprintf(`toml:"%s"`, name)
		var t reflect.Type
		switch o.typ {
		case tString:
			t = reflect.TypeOf((*string)(nil))
		case tStrings:
			t = reflect.TypeOf((*[]string)(nil))
		case tBool:
			t = reflect.TypeOf((*bool)(nil))
		case tInt:
			t = reflect.TypeOf((*int)(nil))
		case tFloat:
			t = reflect.TypeOf((*float64)(nil))
		case tDuration:
			t, tag = reflect.TypeOf((*string)(nil)), tag+` kind:"duration"`
		case tSubagent:
			t = reflect.TypeOf(map[string]fileSubagent(nil))
		}
		n.leaf[name] = field(name, t, tag)
		n.names = append(n.names, name)
	}
	var build func(n *node) reflect.Type
	build = func(n *node) reflect.Type {
		var fs []reflect.StructField
		for _, name := range n.names {
			if sub := n.sub[name]; sub != nil {
				fs = append(fs, field(name, build(sub), fmt.Sprintf(`toml:"%s"`, name)))
			} else {
				fs = append(fs, n.leaf[name])
			}
		}
		return reflect.StructOf(fs)
	}
	return build(root)
}()

// fileSubagent is one [agents.subagents.NAME] table: tasks.SubagentType's
// fields under its JSON names.
type fileSubagent struct {
	Command []string `toml:"command"`
	Stdin   bool     `toml:"stdin"`
	Env     []string `toml:"env"`
}

// parseFile decodes one TOML file into a layer whose values carry src with
// their lines. Errors name the file and line.
func parseFile(data []byte, src Source) (layer, error) {
	fc := reflect.New(fileSchema)
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(fc.Interface()); err != nil {
		return nil, decodeError(src.Path, err)
	}
	lines, err := keyLines(data)
	if err != nil {
		return nil, decodeError(src.Path, err)
	}
	l := layer{}
	var errs []string
	put := func(key string, v any) {
		s := src
		s.Line = lines.of(key)
		sp, _ := lookup(key)
		if err := sp.check(v); err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", src.Path, s.Line, err))
			return
		}
		l[key] = value{v: v, src: s}
	}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			key := prefix + f.Tag.Get("toml")
			fv := v.Field(i)
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(key+".", fv)
			case f.Type.Kind() == reflect.Map: // agents.subagents
				for _, name := range sortedMapKeys(fv) {
					fs := fv.MapIndex(reflect.ValueOf(name)).Interface().(fileSubagent)
					put(key+"."+name, tasks.SubagentType{Command: fs.Command, Stdin: fs.Stdin, Env: fs.Env})
				}
			case fv.IsNil():
			case f.Tag.Get("kind") == "duration":
				s := fv.Elem().String()
				d, err := time.ParseDuration(s)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: %s: %q is not a duration: %s", src.Path, lines.of(key), key, s, DurationHint(s)))
					continue
				}
				put(key, d)
			default:
				put(key, fv.Elem().Interface())
			}
		}
	}
	walk("", fc.Elem())
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return l, nil
}

func sortedMapKeys(m reflect.Value) []string {
	var out []string
	for _, k := range m.MapKeys() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

func sortedKeys(l layer) []string {
	out := make([]string, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// lineMap maps dotted keys (and table names) to the line that sets them.
type lineMap map[string]int

// of returns key's line, or that of its nearest table (0 when unknown).
func (m lineMap) of(key string) int {
	for k := key; k != ""; {
		if n, ok := m[k]; ok {
			return n
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// keyLines walks the document with go-toml's parser and records the line
// of every key, table header and inline-table key.
func keyLines(data []byte) (lineMap, error) {
	m := lineMap{}
	var p unstable.Parser
	p.Reset(data)
	var table []string
	keyOf := func(n *unstable.Node) ([]string, int) {
		var parts []string
		line := 0
		it := n.Key()
		for it.Next() {
			k := it.Node()
			if line == 0 {
				line = p.Shape(k.Raw).Start.Line
			}
			parts = append(parts, string(k.Data))
		}
		return parts, line
	}
	record := func(parts []string, line int) {
		for i := 1; i <= len(parts); i++ {
			if k := strings.Join(parts[:i], "."); m[k] == 0 {
				m[k] = line
			}
		}
	}
	var inline func(prefix []string, v *unstable.Node)
	inline = func(prefix []string, v *unstable.Node) {
		if v == nil || v.Kind != unstable.InlineTable {
			return
		}
		it := v.Children()
		for it.Next() {
			kv := it.Node()
			if kv.Kind != unstable.KeyValue {
				continue
			}
			parts, line := keyOf(kv)
			full := append(append([]string(nil), prefix...), parts...)
			record(full, line)
			inline(full, kv.Value())
		}
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, line := keyOf(e)
			table = parts
			record(parts, line)
		case unstable.KeyValue:
			parts, line := keyOf(e)
			full := append(append([]string(nil), table...), parts...)
			record(full, line)
			inline(full, e.Value())
		}
	}
	return m, p.Error()
}

var typeMsgRE = regexp.MustCompile(`cannot decode TOML (\w+) into (?s:.*)$`)

// decodeError turns go-toml's errors into "PATH:LINE: ..." lines: unknown
// keys (every one), type errors and syntax errors.
func decodeError(path string, err error) error {
	var sme *toml.StrictMissingError
	if errors.As(err, &sme) {
		var out []string
		for _, e := range sme.Errors {
			row, _ := e.Position()
			out = append(out, fmt.Sprintf("%s:%d: unknown key %s", path, row, strings.Join(e.Key(), ".")))
		}
		return errors.New(strings.Join(out, "\n"))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if sm := typeMsgRE.FindStringSubmatch(msg); sm != nil {
			want := "a table"
			if s, ok := lookup(key); ok {
				want = s.typ.word()
			} else if strings.HasPrefix(key, subagentPrefix) {
				want = map[string]string{"command": "an array of strings", "env": "an array of strings", "stdin": "a boolean"}[key[strings.LastIndexByte(key, '.')+1:]]
			}
			msg = fmt.Sprintf("want %s, got a TOML %s", want, sm[1])
		}
		if key != "" {
			return fmt.Errorf("%s:%d: %s: %s", path, row, key, msg)
		}
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, msg)
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s", path, pe.Message)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// The variables that name a state file in place of the state directory's
// (docs/config.md). Only this package reads them: tasks and compact get
// their configuration from the daemon (docs/DESIGN.md#options-table).
const (
	AgentsConfigEnv  = "RUBINOFS_AGENTS_CONFIG"
	CompactConfigEnv = "RUBINOFS_COMPACT_CONFIG"
)

// readStateFile reads the state file at p: nil, with no error, when it is
// absent; at most MaxFileSize bytes.
func readStateFile(p string) ([]byte, error) {
	data, err := readFile(p, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// loadStateFiles reads agents.json and compact.json ($RUBINOFS_AGENTS_CONFIG,
// $RUBINOFS_COMPACT_CONFIG, else the state directory): each is validated by
// its package's own parser, then its members become the keys of the same
// names under [agents] and [compact] (stateLayer).
func loadStateFiles(opts Options) (layer, []Source, error) {
	l := layer{}
	var files []Source
	for _, f := range []struct {
		env, name, prefix string
		parse             func([]byte) error
		// zeroSets: a member with a zero value is the key's default from
		// the state file (compact.json: WithDefaults fills it), not unset
		// (agents.json: zero fields mean "not set").
		zeroSets bool
	}{
		{AgentsConfigEnv, tasks.ConfigFileName, "agents.", func(b []byte) error { _, err := tasks.ParseConfig(b); return err }, false},
		{CompactConfigEnv, compact.ConfigFileName, "compact.", func(b []byte) error { _, err := compact.ParseConfig(b); return err }, true},
	} {
		p := opts.Getenv(f.env)
		if p == "" && opts.StateDir != "" {
			p = filepath.Join(opts.StateDir, f.name)
		}
		if p == "" {
			continue
		}
		raw, err := readStateFile(p)
		if err != nil {
			return nil, nil, err
		}
		if raw == nil {
			continue
		}
		if err := f.parse(raw); err != nil {
			return nil, nil, fmt.Errorf("state file: %s: %w", p, err)
		}
		src := Source{Kind: KindState, Path: p}
		files = append(files, src)
		if err := stateLayer(l, raw, f.prefix, src, f.zeroSets); err != nil {
			return nil, nil, fmt.Errorf("state file: %s: %w", p, err)
		}
	}
	// The state files' values pass the same checks as a TOML file's.
	for _, k := range sortedKeys(l) {
		s, _ := lookup(k)
		if err := s.check(l[k].v); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", l[k].src, err)
		}
	}
	return l, files, nil
}

// stateLayer puts the keys a state file sets into l: each member of its
// JSON object is the key prefix+name, an object that is no key is a table
// one level deeper (compact.json's "summarizer"), and agents.json's
// "subagents" holds the agents.subagents.NAME values. A zero (or negative)
// number, an empty string and null are the key's default with zeroSets,
// else not set. The file was validated by its package's parser.
func stateLayer(l layer, raw []byte, prefix string, src Source, zeroSets bool) error {
	var obj map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	for _, name := range sortedJSONKeys(obj) {
		msg, key := obj[name], prefix+name
		null := string(bytes.TrimSpace(msg)) == "null"
		if key+"." == subagentPrefix {
			var types map[string]tasks.SubagentType
			if err := json.Unmarshal(msg, &types); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			for n, t := range types {
				l[subagentPrefix+n] = value{v: t, src: src}
			}
			continue
		}
		o, ok := lookup(key)
		if !ok {
			if err := stateLayer(l, msg, key+".", src, zeroSets); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		var v any
		zero := true
		if !null {
			var err error
			if v, zero, err = stateValue(o, msg); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		switch {
		case zero && !zeroSets:
		case zero:
			l[key] = value{v: o.Default, src: src}
		default:
			l[key] = value{v: v, src: src}
		}
	}
	return nil
}

// stateValue converts one JSON member to o's type, and says whether it is
// zero (a number <= 0, "", an empty list). Durations are "15m" or seconds.
func stateValue(o Option, msg json.RawMessage) (v any, zero bool, err error) {
	switch o.typ {
	case tString:
		var s string
		err = json.Unmarshal(msg, &s)
		return s, s == "", err
	case tStrings:
		s := []string{}
		err = json.Unmarshal(msg, &s)
		return s, len(s) == 0, err
	case tBool:
		var b bool
		err = json.Unmarshal(msg, &b)
		return b, false, err
	case tInt:
		var n int64
		err = json.Unmarshal(msg, &n)
		return int(n), n <= 0, err
	case tFloat:
		var f float64
		err = json.Unmarshal(msg, &f)
		return f, f <= 0, err
	case tDuration:
		var d tasks.Duration
		err = d.UnmarshalJSON(msg)
		return time.Duration(d), d <= 0, err
	}
	return nil, false, fmt.Errorf("%s: no JSON form", o.Key)
}

func sortedJSONKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
