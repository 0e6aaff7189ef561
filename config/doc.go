package config

import "strings"

// Markers around the key table of docs/config.md, which DocTable generates
// (docs/DESIGN.md#options-table).
const (
	DocTableBegin = "<!-- generated from config/options.go: go test ./config -run TestDocTable -update -->"
	DocTableEnd   = "<!-- end of generated table -->"
)

// docType names a key's type in docs/config.md.
var docType = [...]string{"string", "strings", "bool", "int", "float", "duration", "table"}

// DocTable returns the key table of docs/config.md, one row per Option in
// table order: key, type, default (DocDefault, else Default as TOML),
// flag and meaning (Doc). config's TestDocTable fails, printing this text,
// when docs/config.md's table between DocTableBegin and DocTableEnd
// differs.
func DocTable() string {
	var b strings.Builder
	b.WriteString("| key | type | default | flag | meaning |\n|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, o := range options {
		def := o.DocDefault
		if def == "" && !o.perName() {
			def = "`" + formatValue(o.Default) + "`"
		}
		flag := ""
		if o.Flag != "" {
			flag = "`--" + o.Flag + "`"
		}
		b.WriteString("|")
		for _, c := range []string{"`" + o.Key + "`", docType[o.typ], def, flag, o.Doc} {
			if c != "" {
				b.WriteString(" " + cell(c))
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
