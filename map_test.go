package ratelimit_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMap holds CONTRIBUTING.md's map against the code: every package of
// the repository (a directory with Go files other than tests, in every
// module, bench/ and example/ too) is a row of the map, every row names
// packages that exist, and every import of a package's code (not its
// tests) from this repository is one its row allows.
func TestMap(t *testing.T) {
	doc, err := os.ReadFile("CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := mapRows(t, string(doc))
	imports := repoImports(t)

	listed := map[string]bool{}
	for _, r := range rows {
		for _, p := range r.packages {
			if strings.HasSuffix(p, "/...") {
				n := 0
				for dir := range imports {
					if under(dir, strings.TrimSuffix(p, "/...")) {
						listed[dir] = true
						n++
					}
				}
				if n == 0 {
					t.Errorf("the map's row %q names no package", p)
				}
				continue
			}
			if _, ok := imports[p]; !ok {
				t.Errorf("the map names %q, which is no package (a directory with Go code)", p)
			}
			listed[p] = true
		}
	}
	for dir, deps := range imports {
		if !listed[dir] {
			t.Errorf("the package %q is not in CONTRIBUTING.md's map", dir)
			continue
		}
		allowed := allowedFor(rows, dir)
		for _, d := range deps {
			if !slices.ContainsFunc(allowed, func(a string) bool {
				return a == d || strings.HasSuffix(a, "/...") && under(d, strings.TrimSuffix(a, "/..."))
			}) {
				t.Errorf("%s imports %s, which its row of the map does not allow (%s)", dir, d, strings.Join(allowed, ", "))
			}
		}
	}
}

// A mapRow is a row of the map: its packages, and what they may import.
type mapRow struct {
	packages, allowed []string
}

// mapRows reads the table under "## The map" in doc: its first column
// names packages, its third what they may import, each in backquotes.
func mapRows(t *testing.T, doc string) []mapRow {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## The map\n")
	if !ok {
		t.Fatal(`CONTRIBUTING.md has no section "## The map"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	var rows []mapRow
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "Package" {
			continue
		}
		var r mapRow
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			r.packages = append(r.packages, m[1])
		}
		for _, m := range code.FindAllStringSubmatch(cells[3], -1) {
			r.allowed = append(r.allowed, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) < 10 {
		t.Fatalf("the map has %d rows: not the table this test reads", len(rows))
	}
	return rows
}

// allowedFor returns what dir may import, by its row; a row of "x/..."
// covers every package under x. A package may import what is under
// itself too only where its row says so.
func allowedFor(rows []mapRow, dir string) []string {
	for _, r := range rows {
		for _, p := range r.packages {
			if p == dir || strings.HasSuffix(p, "/...") && under(dir, strings.TrimSuffix(p, "/...")) {
				return r.allowed
			}
		}
	}
	return nil
}

// under reports whether dir is p or a package under it.
func under(dir, p string) bool { return dir == p || strings.HasPrefix(dir, p+"/") }

// repoImports returns, for every package of the repository, the packages
// of the repository its code imports, as directories ("." for the root).
func repoImports(t *testing.T) map[string][]string {
	t.Helper()
	const module = "github.com/ratelimit-go/ratelimit"
	imports := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		deps := imports[dir]
		for _, im := range f.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if p != module && !strings.HasPrefix(p, module+"/") {
				continue
			}
			d := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
			if d == "" {
				d = "."
			}
			if !slices.Contains(deps, d) {
				deps = append(deps, d)
			}
		}
		imports[dir] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}
