package main

// `rubinofs setup claude-code --mcp` and `rubinofs setup codex --mcp`:
// merge `rubinofs mcp` (this executable) as the MCP server "rubinofs" into
// Claude Code's project .mcp.json or Codex's config.toml
// (docs/DESIGN.md#agent-setup).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// mcpServerName is the name the MCP server gets in an agent's
// configuration: Claude Code calls its tools mcp__rubinofs__TOOL.
const mcpServerName = "rubinofs"

// mcpArgs are the arguments of the server's command: `rubinofs mcp`, which
// finds the mount around the agent's working directory.
var mcpArgs = []string{"mcp"}

// isRubinoExe reports whether cmd names a rubinofs executable (by any
// path): setup's own entry, to be updated in place after the binary moved.
func isRubinoExe(cmd string) bool { return filepath.Base(cmd) == "rubinofs" }

// runsMCP reports whether args (a decoded JSON or TOML array) start with
// "mcp": the entry runs `rubinofs mcp`, whatever flags the user added
// (--tools, --mount) after it.
func runsMCP(args any) bool {
	list, _ := args.([]any)
	if len(list) == 0 {
		return false
	}
	s, _ := list[0].(string)
	return s == mcpArgs[0]
}

// mergeMCPJSON merges {"command": exe, "args": ["mcp"]} as
// mcpServers.rubinofs into a Claude Code .mcp.json (empty: none) and
// returns the new JSON (indented, keys sorted) and the changes made (none:
// settings is returned as it is). An existing rubinofs entry whose command
// is another path to rubinofs gets exe in place, its other keys (env, the
// user's flags after "mcp") kept; one that runs something else, or whose
// args do not start with "mcp", is an error, as is a document that is no
// JSON object or whose mcpServers is no object: the caller leaves the file
// untouched.
func mergeMCPJSON(settings []byte, exe string) ([]byte, []string, error) {
	doc, servers, err := jsonObjectAt(settings, "mcpServers")
	if err != nil {
		return nil, nil, err
	}
	var change string
	switch entry, ok := servers[mcpServerName].(map[string]any); {
	case servers[mcpServerName] == nil:
		servers[mcpServerName] = map[string]any{"command": exe, "args": []any{mcpArgs[0]}}
		change = fmt.Sprintf("added the MCP server %q: %s %s", mcpServerName, exe, strings.Join(mcpArgs, " "))
	case !ok:
		return nil, nil, fmt.Errorf("mcpServers.%s is not an object, left as it is", mcpServerName)
	default:
		cmd, _ := entry["command"].(string)
		if err := checkOwnEntry(cmd, entry["args"], "mcpServers."+mcpServerName); err != nil {
			return nil, nil, err
		}
		if cmd == exe {
			return settings, nil, nil
		}
		entry["command"] = exe
		change = fmt.Sprintf("updated the MCP server %q to %s", mcpServerName, exe)
	}
	doc["mcpServers"] = servers
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(out, '\n'), []string{change}, nil
}

// mergeMCPApproval adds "rubinofs" to enabledMcpjsonServers in a Claude
// Code settings file's JSON (empty: none), the list of .mcp.json servers
// the project approved, so that Claude Code starts the server without
// asking (it asks once per project otherwise; print mode approves project
// servers by itself). Every other key and entry is kept; the second
// argument (the executable) is unused. Errors: not a JSON object, or
// enabledMcpjsonServers not a list; the caller leaves the file untouched.
func mergeMCPApproval(settings []byte, _ string) ([]byte, []string, error) {
	doc := map[string]any{}
	if len(bytes.TrimSpace(settings)) > 0 {
		if err := json.Unmarshal(settings, &doc); err != nil {
			return nil, nil, fmt.Errorf("not valid JSON, left as it is: %w", err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
	}
	const key = "enabledMcpjsonServers"
	list, ok := doc[key].([]any)
	if doc[key] != nil && !ok {
		return nil, nil, fmt.Errorf("%q is not a list, left as it is", key)
	}
	for _, e := range list {
		if e == mcpServerName {
			return settings, nil, nil
		}
	}
	doc[key] = append(list, mcpServerName)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(out, '\n'), []string{fmt.Sprintf("approved the MCP server %q of .mcp.json (%s)", mcpServerName, key)}, nil
}

// checkOwnEntry accepts an existing server entry named rubinofs only when
// it is setup's own: a rubinofs executable run with "mcp" first. Anything
// else is the user's, and setup does not overwrite it.
func checkOwnEntry(cmd string, args any, where string) error {
	if !isRubinoExe(cmd) {
		return fmt.Errorf("%s runs %q, not rubinofs: left as it is (remove or rename that entry to let setup add its own)", where, cmd)
	}
	if !runsMCP(args) {
		return fmt.Errorf("%s does not run `rubinofs mcp` (its args do not start with \"mcp\"): left as it is; set its args to [\"mcp\"]", where)
	}
	return nil
}

// codexMCPTable is the table path of the server's entry in Codex's
// config.toml: [mcp_servers.rubinofs].
var codexMCPTable = []string{"mcp_servers", mcpServerName}

// mergeCodexMCP merges [mcp_servers.rubinofs] with command = exe and args
// = ["mcp"] into a Codex config.toml (empty: none) and returns the new
// TOML and the changes made (none: config is returned as it is). It edits
// the text rather than re-encoding the document, so the user's comments,
// key order and formatting stay: a missing entry is appended as a table of
// its own (its values encoded by go-toml), an entry of another path to
// rubinofs gets its command string replaced where it stands. The result is
// decoded again and must equal the old document plus the entry, else it is
// an error naming what to add by hand (an mcp_servers written as an inline
// table cannot take a new table). Errors as mergeMCPJSON's; the caller
// leaves the file untouched.
func mergeCodexMCP(config []byte, exe string) ([]byte, []string, error) {
	doc := map[string]any{}
	if err := toml.Unmarshal(config, &doc); err != nil {
		return nil, nil, fmt.Errorf("not valid TOML, left as it is: %w", err)
	}
	servers, ok := doc[codexMCPTable[0]].(map[string]any)
	if doc[codexMCPTable[0]] != nil && !ok {
		return nil, nil, fmt.Errorf("%s is not a table, left as it is", codexMCPTable[0])
	}
	want := map[string]any{"command": exe, "args": []any{mcpArgs[0]}}
	table := strings.Join(codexMCPTable, ".")
	var out []byte
	var change string
	switch entry, ok := servers[mcpServerName].(map[string]any); {
	case servers[mcpServerName] == nil:
		vals, err := toml.Marshal(struct {
			Command string   `toml:"command"`
			Args    []string `toml:"args"`
		}{exe, mcpArgs})
		if err != nil {
			return nil, nil, err
		}
		out = append([]byte{}, config...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		if len(bytes.TrimSpace(out)) > 0 {
			out = append(out, '\n')
		}
		out = append(out, "["+table+"]\n"...)
		out = append(out, vals...)
		change = fmt.Sprintf("added the MCP server [%s]: %s %s", table, exe, strings.Join(mcpArgs, " "))
		if servers == nil {
			servers = map[string]any{}
			doc[codexMCPTable[0]] = servers
		}
		servers[mcpServerName] = want
	case !ok:
		return nil, nil, fmt.Errorf("%s is not a table, left as it is", table)
	default:
		cmd, _ := entry["command"].(string)
		if err := checkOwnEntry(cmd, entry["args"], table); err != nil {
			return nil, nil, err
		}
		if cmd == exe {
			return config, nil, nil
		}
		at, ok := tomlStringAt(config, append(codexMCPTable, "command"))
		if !ok {
			return nil, nil, fmt.Errorf("%s.command is not a plain `command = \"...\"` line, left as it is; set it to %q by hand", table, exe)
		}
		quoted, err := toml.Marshal(map[string]string{"v": exe}) // "v = 'EXE'\n"
		if err != nil {
			return nil, nil, err
		}
		_, lit, _ := strings.Cut(strings.TrimSpace(string(quoted)), " = ")
		out = append(append(append([]byte{}, config[:at.Offset]...), lit...), config[at.Offset+at.Length:]...)
		entry["command"] = exe
		change = fmt.Sprintf("updated the MCP server [%s] to %s", table, exe)
	}
	again := map[string]any{}
	if err := toml.Unmarshal(out, &again); err != nil || !reflect.DeepEqual(normTOML(again), normTOML(doc)) {
		return nil, nil, fmt.Errorf("cannot add [%s] without changing other settings (is %s an inline table?): left as it is; add by hand:\n[%s]\ncommand = %q\nargs = [\"mcp\"]", table, codexMCPTable[0], table, exe)
	}
	return out, []string{change}, nil
}

// normTOML makes two decoded TOML documents comparable with
// reflect.DeepEqual: arrays become []any whatever go-toml decoded them as.
func normTOML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normTOML(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = normTOML(e)
		}
		return l
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return l
	}
	return v
}

// tomlStringAt finds the string value of the key path in a TOML document
// (a `key = "..."` line in the table [path[:len-1]], or a dotted key
// reaching it) and returns the range of its bytes, quotes included; ok is
// false when the key holds no plain string there (an inline table, an
// array of tables) or the document does not parse.
func tomlStringAt(doc []byte, path []string) (unstable.Range, bool) {
	var p unstable.Parser
	p.Reset(doc)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = table[:0]
			for it := e.Key(); it.Next(); {
				table = append(table, string(it.Node().Data))
			}
			if e.Kind == unstable.ArrayTable {
				table = append(table, "\x00") // never a key of ours
			}
		case unstable.KeyValue:
			key := append([]string{}, table...)
			for it := e.Key(); it.Next(); {
				key = append(key, string(it.Node().Data))
			}
			if v := e.Value(); slices.Equal(key, path) && v.Kind == unstable.String {
				return v.Raw, true
			}
		}
	}
	return unstable.Range{}, false
}

// setupConfigFile merges this executable's `rubinofs mcp` into file with
// merge (mergeMCPJSON, mergeCodexMCP) and returns the changes, one line
// each (none: the file already had it and is left untouched). A missing
// file (and its directory) is created; the file is replaced atomically
// with its mode kept (writeAtomic); a file merge refuses is left byte for
// byte as it was, and the error names it. mode is a new file's (0600 for
// Codex's config.toml, which may hold credentials).
func setupConfigFile(file, exe string, mode os.FileMode, merge func([]byte, string) ([]byte, []string, error)) ([]string, error) {
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	merged, changes, err := merge(old, exe)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(changes) == 0 {
		return nil, nil
	}
	if st, err := os.Stat(file); err == nil {
		mode = st.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	return changes, writeAtomic(file, merged, mode)
}
