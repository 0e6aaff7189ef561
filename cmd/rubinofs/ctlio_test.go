package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestControlPathsNeverOpenedByOS: no call of os.Open, os.OpenFile,
// os.ReadFile, os.WriteFile, os.Create or os.NewFile in this package takes
// a control-tree path (one built with ctltree.DirName or ctlPathOf): those
// go through ctlio.go, whose descriptors Go's poller never sees
// (docs/DESIGN.md#ctl-blocking-io). Directories (os.ReadDir) and os.Stat
// are fine: Go never polls them.
func TestControlPathsNeverOpenedByOS(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	banned := map[string]bool{"Open": true, "OpenFile": true, "ReadFile": true, "WriteFile": true, "Create": true, "NewFile": true}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Variables assigned from a control path, per function.
		ast.Inspect(file, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				return true
			}
			tainted := map[string]bool{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok {
					for i, rhs := range as.Rhs {
						if i < len(as.Lhs) && mentionsCtl(rhs, tainted) {
							if id, ok := as.Lhs[i].(*ast.Ident); ok {
								tainted[id.Name] = true
							}
						}
					}
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "os" || !banned[sel.Sel.Name] {
					return true
				}
				for _, a := range call.Args {
					if mentionsCtl(a, tainted) {
						t.Errorf("%s: os.%s of a control path: use ctlio.go (readCtl, writeCtl, cloneCtl, openCtl)", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
			return false
		})
	}
}

// mentionsCtl reports whether e refers to ctltree.DirName, ctlPathOf or a
// variable assigned from one of them.
func mentionsCtl(e ast.Expr, tainted map[string]bool) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if x.Sel.Name == "DirName" {
				found = true
			}
		case *ast.Ident:
			if x.Name == "ctlPathOf" || tainted[x.Name] {
				found = true
			}
		}
		return !found
	})
	return found
}

// TestCtlErrorMessage: a control file's refusal reads "PATH: REASON
// (ERRNO)", once: a reason that already ends with the errno's text (a
// wrapped system error) does not repeat it.
func TestCtlErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		e    ctlError
		want string
	}{
		{ctlError{"/m/.rubino/x", syscall.EPERM, "not yours"}, "/m/.rubino/x: not yours (operation not permitted)"},
		{ctlError{"/m/.rubino/x", syscall.ENOENT, "no such cgroup: /x: stat /sys/x: no such file or directory"}, "/m/.rubino/x: no such cgroup: /x: stat /sys/x: no such file or directory"},
		{ctlError{"/m/.rubino/x", syscall.EAGAIN, ""}, "/m/.rubino/x: resource temporarily unavailable"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
