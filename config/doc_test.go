package config

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/config.md's key table from the options table")

// TestDocTable: docs/config.md's key table is the options table's
// (DocTable); with -update the test writes it. Every key has its meaning.
func TestDocTable(t *testing.T) {
	for _, o := range options {
		if o.Doc == "" || (o.Flag != "") != (o.Usage != "") {
			t.Errorf("%s: want a Doc, and a Usage exactly with a Flag", o.Key)
		}
	}
	const path = "../docs/config.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, DocTableBegin), strings.Index(doc, DocTableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q around its key table", path, DocTableBegin, DocTableEnd)
	}
	want := DocTable()
	got := doc[i+len(DocTableBegin)+1 : j]
	if got == want {
		return
	}
	if *updateDocs {
		doc = doc[:i+len(DocTableBegin)+1] + want + doc[j:]
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's key table differs from the options table (config/options.go); run go test ./config -run TestDocTable -update, or write between the markers:\n%s", path, want)
}
