package ratelimit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestSurface holds each package to its budget of exported names, as
// issue 27 counts them: top-level functions, types, variables and
// constants, and the methods of exported types (an interface's methods
// are not counted). The budgets leave the root package room for the
// capabilities to come as new values of its concepts, not new names.
func TestSurface(t *testing.T) {
	for _, pkg := range []struct {
		dir string
		max int
	}{{".", 70}, {"store", 25}, {"admin", 15}, {"adapters/grpclimit", 20}} {
		names := exportedNames(t, pkg.dir)
		if len(names) > pkg.max {
			t.Errorf("package %s exports %d names, want at most %d:\n\t%s", pkg.dir, len(names), pkg.max, strings.Join(names, "\n\t"))
		}
		t.Logf("%s: %d exported names: %s", pkg.dir, len(names), strings.Join(names, ", "))
	}
}

// exportedNames parses the non-test Go files of dir and returns their
// exported names, sorted; a method is named Type.Method.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
				} else if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
					names = append(names, recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// receiverType returns the name of a method's receiver type: T for T,
// *T, T[P] and *T[P].
func receiverType(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.ParenExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}
