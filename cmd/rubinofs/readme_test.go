package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestReadmeMountFlags keeps README.md's mount-flag table true and
// complete: every flag it names is a flag of `rubinofs mount`, every flag
// of a mount alone (no configuration key, so not in docs/config.md's
// generated key table) is in it, and it points to that table for the rest
// (docs/DESIGN.md#options-table).
func TestReadmeMountFlags(t *testing.T) {
	const begin, end = "<!-- mount flags:", "<!-- end of mount flags -->"
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q and %q around its mount-flag table", begin, end)
	}
	if !strings.Contains(doc[:i], "docs/config.md#keys") {
		t.Error("README.md's mount flags do not point to the generated key table, docs/config.md#keys")
	}
	flagOf := func(f interface{ Names() []string }) string {
		if n := f.Names()[0]; len(n) > 1 {
			return "--" + n
		}
		return "-" + f.Names()[0]
	}
	var all, keyed []string
	for _, f := range mountFlags() {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue // internal (a hidden flag another command passes)
		}
		all = append(all, flagOf(f))
	}
	for _, f := range keyFlags() {
		keyed = append(keyed, flagOf(f))
	}
	var listed []string
	row := regexp.MustCompile("(?m)^\\| `(--?[a-z][a-z0-9-]*|-o)[ =`]")
	for _, m := range row.FindAllStringSubmatch(doc[i:j], -1) {
		listed = append(listed, m[1])
		if !slices.Contains(all, m[1]) {
			t.Errorf("README.md lists %s, which is not a flag of rubinofs mount", m[1])
		}
	}
	for _, f := range all {
		if !slices.Contains(keyed, f) && !slices.Contains(listed, f) {
			t.Errorf("%s, a flag of a mount alone (no configuration key, so not in docs/config.md), is missing from README.md's mount-flag table", f)
		}
	}
}
