package ratelimit_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The repository's root is this package's directory.
const repoRoot = "."

// skipDir reports whether walking the repository skips the directory
// named name: Git's, hidden ones and test data.
func skipDir(name string) bool {
	return name == ".git" || name == "testdata" || (name != "." && strings.HasPrefix(name, "."))
}

// TestMarkdownLinks checks that every relative link in every Markdown
// file of the repository resolves to a file or directory, and that every
// #anchor into a Markdown file names one of its headings.
func TestMarkdownLinks(t *testing.T) {
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("found no Markdown files")
	}
	anchors := map[string]map[string]bool{} // file -> heading slugs
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		a := markdownAnchors(b)
		anchors[file] = a
		return a, nil
	}
	var broken []string
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(b) {
			if isAbsoluteURL(l.target) {
				continue
			}
			links++
			target, anchor, _ := strings.Cut(l.target, "#")
			resolved := file
			if target != "" {
				resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(resolved); err != nil {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file or directory", file, l.line, l.target))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			a, err := anchorsOf(resolved)
			if err != nil {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %v", file, l.line, l.target, err))
				continue
			}
			if !a[anchor] {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s has no heading #%s", file, l.line, l.target, resolved, anchor))
			}
		}
	}
	t.Logf("%d Markdown files, %d relative links", len(files), links)
	if len(broken) > 0 {
		t.Errorf("%d broken links:\n%s", len(broken), strings.Join(broken, "\n"))
	}
}

type markdownLink struct {
	line   int
	target string
}

var (
	// A link or image: [text](target) or [text](target "title"). The text
	// may hold one level of brackets.
	linkRE = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// A code span, whose brackets are not links.
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	// An HTML anchor: <a name="x"> or id="x".
	htmlAnchorRE = regexp.MustCompile(`<[^>]*\s(?:name|id)="([^"]+)"`)
)

// markdownLinks returns the links of a Markdown file outside code
// blocks and code spans.
func markdownLinks(b []byte) []markdownLink {
	var links []markdownLink
	forEachProseLine(b, func(n int, line string) {
		line = codeSpanRE.ReplaceAllString(line, "code")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, markdownLink{line: n, target: m[1]})
		}
	})
	return links
}

// forEachProseLine calls f with every line outside fenced code blocks,
// numbered from 1.
func forEachProseLine(b []byte, f func(n int, line string)) {
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(nil, 1<<20)
	fence := ""
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for _, c := range trimmed[3:] {
				if c != rune(fence[0]) {
					break
				}
				fence += string(c)
			}
			continue
		}
		f(n, line)
	}
}

// markdownAnchors returns the anchors GitHub makes for the headings of a
// Markdown file, numbered as GitHub numbers repeats, and its HTML anchors.
func markdownAnchors(b []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	forEachProseLine(b, func(_ int, line string) {
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			return
		}
		text := strings.TrimLeft(line, "#")
		if len(line)-len(text) > 6 || (text != "" && text[0] != ' ' && text[0] != '\t') {
			return
		}
		slug := githubSlug(text)
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors
}

var headingLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// githubSlug returns the anchor GitHub makes for a heading's text:
// lower case, without punctuation but hyphens and underscores, spaces
// turned into hyphens.
func githubSlug(text string) string {
	text = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), "#"))
	text = headingLinkRE.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isAbsoluteURL(target string) bool {
	for _, scheme := range []string{"http:", "https:", "mailto:"} {
		if strings.HasPrefix(strings.ToLower(target), scheme) {
			return true
		}
	}
	return false
}

func TestGithubSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"What `t` promises", "what-t-promises"},
		{"Quota units (`qu`)", "quota-units-qu"},
		{"Redis users, permissions and the startup check", "redis-users-permissions-and-the-startup-check"},
		{"Limits per request: plans and tiers", "limits-per-request-plans-and-tiers"},
		{"go-redis's AutoPipeliner", "go-rediss-autopipeliner"},
		{"A [link](x.md) in it", "a-link-in-it"},
	} {
		if got := githubSlug(c.heading); got != c.want {
			t.Errorf("githubSlug(%q): got %q, want %q", c.heading, got, c.want)
		}
	}
}

// goPackage is what a doc link may name in one package: its top-level
// names, and the methods and fields of each type.
type goPackage struct {
	importPath string
	top        map[string]bool
	members    map[string]map[string]bool // type -> methods, fields, interface methods
	embeds     map[string][]string        // type -> the types of this package it embeds
}

func (p *goPackage) has(recv, name string) bool {
	if recv == "" {
		return p.top[name]
	}
	return p.hasMember(recv, name, 0)
}

func (p *goPackage) hasMember(typ, name string, depth int) bool {
	if p.members[typ][name] {
		return true
	}
	if depth > 8 {
		return false
	}
	for _, e := range p.embeds[typ] {
		if p.hasMember(e, name, depth+1) {
			return true
		}
	}
	return false
}

func newGoPackage(importPath string, files []*ast.File) *goPackage {
	p := &goPackage{importPath: importPath, top: map[string]bool{}, members: map[string]map[string]bool{}, embeds: map[string][]string{}}
	member := func(typ, name string) {
		if p.members[typ] == nil {
			p.members[typ] = map[string]bool{}
		}
		p.members[typ][name] = true
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					p.top[d.Name.Name] = true
					continue
				}
				if typ := typeName(d.Recv.List[0].Type); typ != "" {
					member(typ, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.top[n.Name] = true
						}
					case *ast.TypeSpec:
						p.top[s.Name.Name] = true
						fields := typeFields(s.Type)
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								member(s.Name.Name, n.Name)
							}
							if len(fl.Names) == 0 { // embedded
								if typ := typeName(fl.Type); typ != "" {
									member(s.Name.Name, typ)
									p.embeds[s.Name.Name] = append(p.embeds[s.Name.Name], typ)
								}
							}
						}
					}
				}
			}
		}
	}
	return p
}

// typeFields returns the fields of a struct type or the methods of an
// interface type, or nil for any other type.
func typeFields(t ast.Expr) *ast.FieldList {
	switch t := t.(type) {
	case *ast.StructType:
		return t.Fields
	case *ast.InterfaceType:
		return t.Methods
	}
	return nil
}

// typeName returns the name of a receiver's or embedded field's type:
// T for T, *T, T[P] and pkg.T.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}

// parsePackageDir parses the non-test Go files of dir that build on this
// platform, by package name.
func parsePackageDir(fset *token.FileSet, dir string) (map[string][]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	pkgs := map[string][]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	return pkgs, nil
}

// modulePath returns the module path of the go.mod in dir, or "".
func modulePath(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// repoPackage is one package of the repository, parsed.
type repoPackage struct {
	*goPackage
	fset  *token.FileSet
	files []*ast.File
	doc   *doc.Package
}

// TestDocLinks checks that every [Name] doc link in the comments of every
// package of every module in the repository names something that exists:
// in the package itself, in another package of the repository, or in the
// standard library. Links into other modules are counted, not checked.
func TestDocLinks(t *testing.T) {
	fset := token.NewFileSet()
	pkgs := map[string]*repoPackage{} // by import path
	byName := map[string][]string{}   // package name -> import paths in the repository
	type module struct{ dir, path string }
	var modules []module // innermost last
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if skipDir(d.Name()) {
			return filepath.SkipDir
		}
		for len(modules) > 0 && !inDir(p, modules[len(modules)-1].dir) {
			modules = modules[:len(modules)-1]
		}
		if mp := modulePath(p); mp != "" {
			modules = append(modules, module{p, mp})
		}
		if len(modules) == 0 {
			return nil
		}
		m := modules[len(modules)-1]
		parsed, err := parsePackageDir(fset, p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(m.dir, p)
		if err != nil {
			return err
		}
		importPath := m.path
		if rel != "." {
			importPath = path.Join(m.path, filepath.ToSlash(rel))
		}
		for name, files := range parsed {
			dp, err := doc.NewFromFiles(fset, files, importPath, doc.AllDecls|doc.PreserveAST)
			if err != nil {
				return fmt.Errorf("%s: %v", p, err)
			}
			pkgs[importPath] = &repoPackage{goPackage: newGoPackage(importPath, files), fset: fset, files: files, doc: dp}
			byName[name] = append(byName[name], importPath)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("found no Go packages")
	}

	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	stdRoot := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	std := map[string]*goPackage{}
	stdPackage := func(importPath string) *goPackage {
		if p, ok := std[importPath]; ok {
			return p
		}
		var p *goPackage
		dir := filepath.Join(stdRoot, filepath.FromSlash(importPath))
		if parsed, err := parsePackageDir(token.NewFileSet(), dir); err == nil {
			var files []*ast.File
			for name, fs := range parsed {
				if name != "main" && !strings.HasSuffix(name, "_test") {
					files = append(files, fs...)
				}
			}
			if len(files) > 0 {
				p = newGoPackage(importPath, files)
			}
		}
		std[importPath] = p
		return p
	}
	isRepo := func(importPath string) bool {
		for _, p := range pkgs {
			if m := p.importPath; importPath == m || strings.HasPrefix(importPath, m+"/") || strings.HasPrefix(m, importPath+"/") {
				return true
			}
		}
		return false
	}
	isStd := func(importPath string) bool {
		first, _, _ := strings.Cut(importPath, "/")
		return !strings.Contains(first, ".")
	}

	var broken []string
	checked, thirdParty := 0, 0
	paths := make([]string, 0, len(pkgs))
	for ip := range pkgs {
		paths = append(paths, ip)
	}
	slices.Sort(paths)
	for _, ip := range paths {
		rp := pkgs[ip]
		parser := rp.doc.Parser()
		parser.LookupSym = func(recv, name string) bool { return true } // every [Name] is a link; checked below
		lookup := parser.LookupPackage
		parser.LookupPackage = func(name string) (string, bool) {
			if p, ok := lookup(name); ok {
				return p, ok
			}
			if ips := byName[name]; len(ips) == 1 { // a package of the repository, not imported here
				return ips[0], true
			}
			return "", false
		}
		for _, g := range docComments(rp.files) {
			for _, l := range docLinks(parser.Parse(g.Text())) {
				target := l.ImportPath
				var p *goPackage
				switch {
				case target == "" || target == ip:
					p = rp.goPackage
				case isRepo(target):
					if q := pkgs[target]; q != nil {
						p = q.goPackage
					}
				case isStd(target):
					p = stdPackage(target)
				default:
					thirdParty++
					continue
				}
				checked++
				text := docLinkText(l)
				pos := rp.fset.Position(linkPos(g, text))
				where := fmt.Sprintf("%s:%d: [%s]", pos.Filename, pos.Line, text)
				switch {
				case p == nil:
					broken = append(broken, fmt.Sprintf("%s: no package %s", where, target))
				case l.Name == "":
					// a link to the package itself
				case !p.has(l.Recv, l.Name):
					name := l.Name
					if l.Recv != "" {
						name = l.Recv + "." + l.Name
					}
					broken = append(broken, fmt.Sprintf("%s: package %s has no %s", where, p.importPath, name))
				}
			}
		}
	}
	// Names written plainly, as "store.NewRedis" or "ratelimit.HeaderKey",
	// of a package of the repository: they must exist too.
	mention := regexp.MustCompile(`(?:^|[^\w.])([a-z]\w*)\.([A-Z]\w*)`)
	mentions := 0
	for _, ip := range paths {
		rp := pkgs[ip]
		for _, g := range docComments(rp.files) {
			for _, m := range mention.FindAllStringSubmatch(g.Text(), -1) {
				ips := byName[m[1]]
				if len(ips) != 1 {
					continue // not a package of the repository, or ambiguous
				}
				mentions++
				if q := pkgs[ips[0]]; !q.goPackage.has("", m[2]) {
					pos := rp.fset.Position(g.Pos())
					broken = append(broken, fmt.Sprintf("%s:%d: %s.%s: package %s has no %s", pos.Filename, pos.Line, m[1], m[2], ips[0], m[2]))
				}
			}
		}
	}
	t.Logf("%d packages, %d doc links checked, %d into third-party packages not checked, %d names written plainly checked", len(pkgs), checked, thirdParty, mentions)
	if len(broken) > 0 {
		t.Errorf("%d broken doc links:\n%s", len(broken), strings.Join(broken, "\n"))
	}
}

// inDir reports whether p is dir or inside it.
func inDir(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// docComments returns the doc comments of files: the package's, and those
// of every declaration, spec, struct field and interface method.
func docComments(files []*ast.File) []*ast.CommentGroup {
	var groups []*ast.CommentGroup
	add := func(gs ...*ast.CommentGroup) {
		for _, g := range gs {
			if g != nil {
				groups = append(groups, g)
			}
		}
	}
	for _, f := range files {
		add(f.Doc)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				add(d.Doc)
			case *ast.GenDecl:
				add(d.Doc)
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						add(s.Doc, s.Comment)
					case *ast.TypeSpec:
						add(s.Doc, s.Comment)
						if fields := typeFields(s.Type); fields != nil {
							for _, fl := range fields.List {
								add(fl.Doc, fl.Comment)
							}
						}
					}
				}
			}
		}
	}
	return groups
}

// docLinks returns the doc links of a parsed comment.
func docLinks(d *comment.Doc) []*comment.DocLink {
	var links []*comment.DocLink
	var text func([]comment.Text)
	text = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				links = append(links, t)
			case *comment.Link:
				text(t.Text)
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				text(b.Text)
			case *comment.Heading:
				text(b.Text)
			case *comment.List:
				for _, it := range b.Items {
					blocks(it.Content)
				}
			}
		}
	}
	blocks(d.Content)
	return links
}

// docLinkText returns a doc link's text, as written between the brackets.
func docLinkText(l *comment.DocLink) string {
	var b strings.Builder
	for _, t := range l.Text {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(string(t))
		case comment.Italic:
			b.WriteString(string(t))
		}
	}
	return b.String()
}

// linkPos returns the position of the comment line of g that holds
// [text], or g's own position.
func linkPos(g *ast.CommentGroup, text string) token.Pos {
	for _, c := range g.List {
		if strings.Contains(c.Text, "["+text+"]") {
			return c.Pos()
		}
	}
	return g.Pos()
}

// TestReadmeQuickStartBuilds: the README's quick start is a program that
// builds against the module as it is (go vet compiles it).
func TestReadmeQuickStartBuilds(t *testing.T) {
	_, code, ok := strings.Cut(markdownSection(t, "README.md", "Quick start"), "```go\n")
	if ok {
		code, _, ok = strings.Cut(code, "\n```")
	}
	if !ok || !strings.HasPrefix(code, "package main\n") {
		t.Fatal("README.md's quick start has no Go program (a ```go block starting with package main)")
	}
	dir, err := os.MkdirTemp("testdata", "quickstart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "vet", "./"+filepath.ToSlash(dir)).CombinedOutput(); err != nil {
		t.Fatalf("the README's quick start does not build: %v\n%s\n%s", err, out, code)
	}
}

// markdownSection returns the text of file's section "## heading", up to
// the next section of that level, and fails t when file has none.
func markdownSection(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", file, "## "+heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// TestReleaseStepsRequireATaggedRoot: CONTRIBUTING.md's release steps
// leave every nested module requiring the root's tag with no replace of
// it, after the root is tagged and before the module is; and each nested
// module's go.mod is either before its release (the root at v0.0.0 beside
// a replace) or after (a tag, no replace). The steps with a part removed
// must fail the check.
func TestReleaseStepsRequireATaggedRoot(t *testing.T) {
	releases := markdownSection(t, "CONTRIBUTING.md", "Releases")
	if problem := releaseStepsProblem(releases); problem != "" {
		t.Errorf("CONTRIBUTING.md's release steps: %s", problem)
	}
	for _, cut := range []string{
		"-dropreplace=github.com/ratelimit-go/ratelimit",
		"-require=github.com/ratelimit-go/ratelimit@v1.2.3",
		"git tag v1.2.3",
		"git tag\n   adapters/ginlimit/v1.2.3",
	} {
		if !strings.Contains(releases, cut) {
			t.Fatalf("the release steps no longer hold %q; update this test", cut)
		}
		if releaseStepsProblem(strings.Replace(releases, cut, "", 1)) == "" {
			t.Errorf("the release steps without %q pass the check", cut)
		}
	}

	for _, dir := range []string{"adapters/ginlimit", "adapters/echolimit", "adapters/grpclimit", "extra/ratelimitprom", "extra/ratelimitotel"} {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		req := rootRequire.FindSubmatch(mod)
		replaced := rootReplace.Match(mod)
		switch {
		case req == nil:
			t.Errorf("%s/go.mod does not require the root module", dir)
		case string(req[1]) == "v0.0.0" && !replaced:
			t.Errorf("%s/go.mod requires the root at v0.0.0, which cannot be fetched, without a replace", dir)
		case string(req[1]) != "v0.0.0" && replaced:
			t.Errorf("%s/go.mod requires the root at %s but still replaces it: drop the replace at a release", dir, req[1])
		}
	}
}

// The root module's require and replace lines in a nested module's
// go.mod, in a block or not.
var (
	rootRequire = regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/ratelimit-go/ratelimit\s+(v\S+)\s*(?://.*)?$`)
	rootReplace = regexp.MustCompile(`(?m)^\s*(?:replace\s+)?github\.com/ratelimit-go/ratelimit(?:\s+v\S+)?\s+=>`)

	numberedStep = regexp.MustCompile(`^\d+\. `)
)

// releaseStepsProblem says what is wrong with the numbered release steps
// of CONTRIBUTING.md, or returns "": a step tags the root, a later one
// drops the root's replace in the nested modules and requires the root's
// tag, a later one tags the nested modules.
func releaseStepsProblem(text string) string {
	var steps []string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case numberedStep.MatchString(line):
			steps = append(steps, line)
		case len(steps) > 0 && strings.HasPrefix(line, "   "):
			steps[len(steps)-1] += " " + strings.TrimSpace(line)
		}
	}
	find := func(parts ...string) int {
		for i, s := range steps {
			s = strings.Join(strings.Fields(s), " ")
			all := true
			for _, p := range parts {
				all = all && strings.Contains(s, p)
			}
			if all {
				return i
			}
		}
		return -1
	}
	rootTag := find("git tag v")
	edit := find("-dropreplace=github.com/ratelimit-go/ratelimit", "-require=github.com/ratelimit-go/ratelimit@v", "GOWORK=off")
	nestedTag := find("git tag adapters/")
	switch {
	case len(steps) == 0:
		return "no numbered steps"
	case rootTag < 0:
		return "no step tags the root module (git tag v...)"
	case edit < 0:
		return "no step drops the nested modules' replace of the root and requires its tag, checked with GOWORK=off"
	case nestedTag < 0:
		return "no step tags the nested modules (git tag adapters/...)"
	case !(rootTag < edit && edit < nestedTag):
		return fmt.Sprintf("the steps run out of order: the root tagged in step %d, the nested modules' go.mod in step %d, their tags in step %d", rootTag+1, edit+1, nestedTag+1)
	}
	return ""
}

// TestGodocSpeaksToUsers: what go doc shows of the package is for its
// users: no notes for contributors about the files the code lives in,
// which belong in plain comments inside the code.
func TestGodocSpeaksToUsers(t *testing.T) {
	out, err := exec.Command("go", "doc", "-all", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go doc -all .: %v\n%s", err, out)
	}
	note := regexp.MustCompile(`(?i)\bthis file\b|\bcontributors?\b|\b[a-z_]+\.go\b`)
	for i, line := range strings.Split(string(out), "\n") {
		if note.MatchString(line) {
			t.Errorf("go doc -all . line %d speaks to contributors: %s", i+1, strings.TrimSpace(line))
		}
	}
}
