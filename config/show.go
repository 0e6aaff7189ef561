package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/tasks"
)

// WriteTOML writes the effective config as TOML, one key per line with a
// "# from SOURCE" comment, sections in the order of the file schema. The
// output parses back as a config file (the comments aside, it is one).
func (c *Config) WriteTOML(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("# rubinofs effective config: flags > workspace file > user file > state files > defaults\n")
	for _, f := range c.Files {
		fmt.Fprintf(&b, "# read: %s\n", f)
	}
	section := ""
	var subs []Entry
	for _, e := range c.entries {
		if isSubagentKey(e.Key) {
			subs = append(subs, e)
			continue
		}
		i := strings.LastIndexByte(e.Key, '.')
		sec, name := e.Key[:i], e.Key[i+1:]
		if sec != section {
			section = sec
			fmt.Fprintf(&b, "\n[%s]\n", sec)
		}
		line := name + " = " + formatValue(e.Value)
		fmt.Fprintf(&b, "%-40s # from %s\n", line, e.Source)
	}
	for _, e := range subs {
		t := e.Value.(tasks.SubagentType)
		fmt.Fprintf(&b, "\n[agents.subagents.%s] # from %s\n", quoteKey(strings.TrimPrefix(e.Key, subagentPrefix)), e.Source)
		fmt.Fprintf(&b, "command = %s\n", formatValue(t.Command))
		if t.Stdin {
			b.WriteString("stdin = true\n")
		}
		if len(t.Env) > 0 {
			fmt.Fprintf(&b, "env = %s\n", formatValue(t.Env))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// JSONEntry is one value of WriteJSON's output.
type JSONEntry struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	From   string `json:"from"` // Source.String()
	Source Source `json:"source"`
}

// WriteJSON writes the effective config as a JSON array of JSONEntry, in
// WriteTOML's order. Durations are strings ("1h"); subagent types are
// objects with tasks.SubagentType's JSON fields.
func (c *Config) WriteJSON(w io.Writer) error {
	out := make([]JSONEntry, 0, len(c.entries))
	for _, e := range c.entries {
		v := e.Value
		if d, ok := v.(time.Duration); ok {
			v = formatDuration(d)
		}
		out = append(out, JSONEntry{Key: e.Key, Value: v, From: e.Source.String(), Source: e.Source})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// formatValue renders v as a TOML value.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return quote(x)
	case []string:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = quote(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case time.Duration:
		return quote(formatDuration(x))
	case tasks.SubagentType:
		return "{command = " + formatValue(x.Command) + "}"
	}
	return fmt.Sprint(v)
}

// formatDuration is time.Duration.String without trailing zero units:
// "1h", "1m30s", "500ms".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// quote renders s as a TOML basic string (JSON's escapes are TOML's).
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// quoteKey quotes a table key that is not a bare TOML key.
func quoteKey(k string) string {
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return quote(k)
		}
	}
	return k
}
