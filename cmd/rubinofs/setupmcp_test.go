package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// TestSetupMCPJSONMerge: the rubinofs server joins the user's servers and
// other keys in .mcp.json, a second merge changes nothing, and a merge
// from another rubinofs path updates the command in place, keeping the
// user's flags after "mcp" and env.
func TestSetupMCPJSONMerge(t *testing.T) {
	user := `{"mcpServers": {"github": {"type": "http", "url": "https://example.invalid/mcp"}}, "other": 1}`
	exe := "/usr/local/bin/rubinofs"
	out, changes, err := mergeMCPJSON([]byte(user), exe)
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0], "added the MCP server") {
		t.Fatalf("merge: changes %q, err %v", changes, err)
	}
	var doc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
		Other      int                       `json:"other"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("merged .mcp.json is not JSON: %v\n%s", err, out)
	}
	if doc.Other != 1 || doc.MCPServers["github"]["url"] != "https://example.invalid/mcp" {
		t.Errorf("the user's server or keys were not kept:\n%s", out)
	}
	if r := doc.MCPServers["rubinofs"]; r["command"] != exe || len(r["args"].([]any)) != 1 || r["args"].([]any)[0] != "mcp" {
		t.Errorf("mcpServers.rubinofs = %v, want command %s args [mcp]", r, exe)
	}

	again, changes, err := mergeMCPJSON(out, exe)
	if err != nil || len(changes) != 0 || !bytes.Equal(again, out) {
		t.Errorf("a second merge changed %q (err %v)", changes, err)
	}

	custom := strings.Replace(string(out), `"mcp"`, `"mcp", "--tools", "status,why"`, 1)
	moved := "/opt/rubinofs/bin/rubinofs"
	out2, changes, err := mergeMCPJSON([]byte(custom), moved)
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0], "updated") {
		t.Fatalf("merge from a moved binary: changes %q, err %v", changes, err)
	}
	json.Unmarshal(out2, &doc)
	if r := doc.MCPServers["rubinofs"]; r["command"] != moved || len(r["args"].([]any)) != 3 {
		t.Errorf("after the move: %v, want the new command and the user's args kept", r)
	}

	if out, changes, err := mergeMCPJSON(nil, exe); err != nil || len(changes) != 1 || !strings.Contains(string(out), `"mcpServers"`) {
		t.Errorf("merge into no file: %v %q\n%s", err, changes, out)
	}
}

// TestSetupMCPJSONRefuses: a file setup cannot read, or a rubinofs entry
// that is not its own, is an error naming what is wrong.
func TestSetupMCPJSONRefuses(t *testing.T) {
	for bad, want := range map[string]string{
		`{not json`:                         "not valid JSON",
		`[1]`:                               "not valid JSON",
		`{"mcpServers": []}`:                `"mcpServers" is not an object`,
		`{"mcpServers": {"rubinofs": "x"}}`: "mcpServers.rubinofs is not an object",
		`{"mcpServers": {"rubinofs": {"command": "/usr/bin/other", "args": ["mcp"]}}}`:      `runs "/usr/bin/other", not rubinofs`,
		`{"mcpServers": {"rubinofs": {"command": "/usr/bin/rubinofs", "args": ["serve"]}}}`: "does not run `rubinofs mcp`",
	} {
		if _, _, err := mergeMCPJSON([]byte(bad), "/bin/rubinofs"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("merge into %s: err %v, want %q", bad, err, want)
		}
	}
}

// codexEntry decodes config.toml and returns [mcp_servers.rubinofs].
func codexEntry(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("config.toml does not parse: %v\n%s", err, b)
	}
	s, _ := doc["mcp_servers"].(map[string]any)
	e, _ := s["rubinofs"].(map[string]any)
	return e
}

// TestSetupCodexMCPMerge: the [mcp_servers.rubinofs] table is appended to
// a config.toml whose comments, order and other servers stay byte for
// byte; a second merge changes nothing; a moved binary's command is
// replaced where it stands, nothing else of the file changed.
func TestSetupCodexMCPMerge(t *testing.T) {
	user := `# my codex config
model = "gpt-5.5"   # keep this comment
approval_policy = "never"

[mcp_servers.github]
command = "gh-mcp"
args = ["--stdio"]

[features]
plugins = false`
	exe := "/usr/local/bin/rubinofs"
	out, changes, err := mergeCodexMCP([]byte(user), exe)
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0], "added the MCP server [mcp_servers.rubinofs]") {
		t.Fatalf("merge: changes %q, err %v", changes, err)
	}
	if !strings.HasPrefix(string(out), user+"\n") {
		t.Errorf("the user's text was not kept as it was:\n%s", out)
	}
	e := codexEntry(t, out)
	if e["command"] != exe || len(e["args"].([]any)) != 1 || e["args"].([]any)[0] != "mcp" {
		t.Errorf("[mcp_servers.rubinofs] = %v, want command %s args [mcp]\n%s", e, exe, out)
	}

	again, changes, err := mergeCodexMCP(out, exe)
	if err != nil || len(changes) != 0 || !bytes.Equal(again, out) {
		t.Errorf("a second merge changed %q (err %v)", changes, err)
	}

	moved := "/opt/my tools/rubinofs"
	out2, changes, err := mergeCodexMCP(out, moved)
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0], "updated") {
		t.Fatalf("merge from a moved binary: changes %q, err %v", changes, err)
	}
	if e := codexEntry(t, out2); e["command"] != moved {
		t.Errorf("after the move: %v, want command %q\n%s", e, moved, out2)
	}
	if !strings.HasPrefix(string(out2), user+"\n") || strings.Count(string(out2), "[mcp_servers.rubinofs]") != 1 {
		t.Errorf("the move changed more than the command:\n%s", out2)
	}

	if out, _, err := mergeCodexMCP(nil, exe); err != nil || codexEntry(t, out)["command"] != exe {
		t.Errorf("merge into no file: %v\n%s", err, out)
	}
	// An explicit [mcp_servers] header of the user's: the new table is a
	// sub-table of it, valid TOML.
	if out, _, err := mergeCodexMCP([]byte("[mcp_servers]\n"), exe); err != nil || codexEntry(t, out)["command"] != exe {
		t.Errorf("merge under an explicit [mcp_servers]: %v\n%s", err, out)
	}
}

// TestSetupCodexMCPRefuses: a config.toml setup cannot read, or cannot
// extend without changing other settings, is an error naming what to do.
func TestSetupCodexMCPRefuses(t *testing.T) {
	for bad, want := range map[string]string{
		"model = ":          "not valid TOML",
		"mcp_servers = 3\n": "mcp_servers is not a table",
		"mcp_servers = { github = { command = \"gh\" } }\n":                          "add by hand",
		"[mcp_servers.rubinofs]\ncommand = \"/usr/bin/other\"\nargs = [\"mcp\"]\n":   `runs "/usr/bin/other", not rubinofs`,
		"mcp_servers.rubinofs = { command = \"/old/rubinofs\", args = [\"mcp\"] }\n": "not a plain",
	} {
		if _, _, err := mergeCodexMCP([]byte(bad), "/bin/rubinofs"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("merge into %q: err %v, want %q", bad, err, want)
		}
	}
}

// TestSetupMCPFileLeavesBrokenFile: setupConfigFile creates a missing
// file, keeps an existing file's mode, writes nothing when there is
// nothing to change, and leaves a file it cannot merge byte for byte as
// it was, with an error naming the file.
func TestSetupMCPFileLeavesBrokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		merge func([]byte, string) ([]byte, []string, error)
	}{{".mcp.json", mergeMCPJSON}, {"config.toml", mergeCodexMCP}} {
		file := filepath.Join(dir, "sub", c.name)
		if ch, err := setupConfigFile(file, "/bin/rubinofs", 0o600, c.merge); err != nil || len(ch) != 1 {
			t.Fatalf("%s: setup into a missing file: %q, %v", c.name, ch, err)
		}
		if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: a new file's mode = %v, want 0600", c.name, st.Mode().Perm())
		}
		os.Chmod(file, 0o640)
		before, _ := os.Stat(file)
		if ch, err := setupConfigFile(file, "/bin/rubinofs", 0o600, c.merge); err != nil || len(ch) != 0 {
			t.Errorf("%s: a second setup: %q, %v", c.name, ch, err)
		}
		if after, _ := os.Stat(file); !os.SameFile(before, after) {
			t.Errorf("%s: a setup with nothing to change rewrote the file", c.name)
		}
		if ch, err := setupConfigFile(file, "/usr/bin/rubinofs", 0o600, c.merge); err != nil || len(ch) != 1 {
			t.Errorf("%s: setup from a moved binary: %q, %v", c.name, ch, err)
		}
		if st, _ := os.Stat(file); st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode after setup = %v, want 0640 kept", c.name, st.Mode().Perm())
		}
		broken := []byte("{broken = \n\x00 not json nor toml")
		os.WriteFile(file, broken, 0o644)
		_, err := setupConfigFile(file, "/bin/rubinofs", 0o600, c.merge)
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "left as it is") {
			t.Errorf("%s: setup over a broken file: err %v, want one naming the file and saying it was left", c.name, err)
		}
		if b, _ := os.ReadFile(file); !bytes.Equal(b, broken) {
			t.Errorf("%s: a broken file was changed: %q", c.name, b)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "sub", "."+c.name+".*")); len(left) != 0 {
			t.Errorf("%s: temporary files left: %v", c.name, left)
		}
	}
}
