package ratelimit_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDocSnippetsBuild: every Go block of the README and docs/ builds
// against the modules as they are (go vet compiles them). A block that is
// a whole program (it starts with "package") builds as one; any other is
// a fragment, built as the body of a function, but for the declarations
// at its left margin (func, type, var), which stay at the top level. The
// fragment's context, the names it uses without declaring them, is in an
// HTML comment right above the block, which a reader of the rendered page
// does not see:
//
//	<!-- go:snippet func(s ratelimit.Store, mux *http.ServeMux)
//	var model interface{ Generate(r *http.Request) struct{ Tokens int } }
//	-->
//
// Its first line gives the function's parameters; the lines after it
// declarations at the top level. "go:snippet expressions" builds each line
// of the block as an expression of its own, "go:snippet options" the block
// as the options of ratelimit.New. "..." and "{ ... }" stand for
// elided code, as in Go's own documentation: the first line is dropped,
// the second builds as an empty block. Imports are added for the packages
// the block names.
func TestDocSnippetsBuild(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md"}, files...)
	dir, err := os.MkdirTemp("testdata", "snippets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var where []string // each package's block: file and line
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range goBlocks(string(b)) {
			src, err := snippetSource(s)
			if err != nil {
				t.Errorf("%s:%d: %v", file, s.line, err)
				continue
			}
			pkg := filepath.Join(dir, fmt.Sprintf("s%02d", len(where)))
			if err := os.Mkdir(pkg, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			where = append(where, fmt.Sprintf("%s:%d", file, s.line))
		}
	}
	if len(where) < 20 {
		t.Fatalf("found %d Go blocks in the docs: not what this test reads", len(where))
	}
	out, err := exec.Command("go", "vet", "./"+filepath.ToSlash(dir)+"/...").CombinedOutput()
	if err == nil {
		return
	}
	// Name each failure by its block in the docs.
	named := regexp.MustCompile(regexp.QuoteMeta(filepath.ToSlash(dir)) + `/s(\d\d)/snippet.go:(\d+)`)
	msg := named.ReplaceAllStringFunc(string(out), func(m string) string {
		sub := named.FindStringSubmatch(m)
		i, _ := strconv.Atoi(sub[1])
		return where[i] + " (generated line " + sub[2] + ")"
	})
	t.Errorf("Go blocks of the docs do not build: %v\n%s", err, msg)
	for i, w := range where {
		if strings.Contains(msg, w) {
			src, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("s%02d", i), "snippet.go"))
			t.Logf("%s, as built:\n%s", w, src)
		}
	}
}

// A goBlock is a ```go block of a Markdown file, and the go:snippet
// comment above it, if any.
type goBlock struct {
	line    int // of the block's first line of code
	code    string
	context string // the comment's text after "go:snippet"
}

// goBlocks returns the ```go blocks of doc.
func goBlocks(doc string) []goBlock {
	lines := strings.Split(doc, "\n")
	var blocks []goBlock
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		b := goBlock{line: i + 2}
		// The comment ends on the line above the block.
		if i > 0 && strings.HasSuffix(strings.TrimSpace(lines[i-1]), "-->") {
			for j := i - 1; j >= 0; j-- {
				if k := strings.Index(lines[j], "<!-- go:snippet"); k >= 0 {
					c := strings.Join(lines[j:i], "\n")
					c = c[strings.Index(c, "go:snippet")+len("go:snippet"):]
					b.context = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(c), "-->"))
					break
				}
			}
		}
		var code []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			code = append(code, lines[i])
		}
		b.code = strings.Join(code, "\n")
		blocks = append(blocks, b)
	}
	return blocks
}

// snippetImports are the packages a block may name, by the name it uses.
var snippetImports = map[string]string{
	"ratelimit":     "github.com/ratelimit-go/ratelimit",
	"store":         "github.com/ratelimit-go/ratelimit/store",
	"admin":         "github.com/ratelimit-go/ratelimit/admin",
	"outbound":      "github.com/ratelimit-go/ratelimit/outbound",
	"grpclimit":     "github.com/ratelimit-go/ratelimit/adapters/grpclimit",
	"ginlimit":      "github.com/ratelimit-go/ratelimit/adapters/ginlimit",
	"echolimit":     "github.com/ratelimit-go/ratelimit/adapters/echolimit",
	"ratelimitprom": "github.com/ratelimit-go/ratelimit/extra/ratelimitprom",
	"ratelimitotel": "github.com/ratelimit-go/ratelimit/extra/ratelimitotel",
	"redis":         "github.com/redis/go-redis/v9",
	"gin":           "github.com/gin-gonic/gin",
	"echo":          "github.com/labstack/echo/v4",
	"grpc":          "google.golang.org/grpc",
	"prometheus":    "github.com/prometheus/client_golang/prometheus",
	"otel":          "go.opentelemetry.io/otel",
	"context":       "context",
	"errors":        "errors",
	"fmt":           "fmt",
	"http":          "net/http",
	"json":          "encoding/json",
	"log":           "log",
	"slog":          "log/slog",
	"os":            "os",
	"strings":       "strings",
	"time":          "time",
	"tls":           "crypto/tls",
	"x509":          "crypto/x509",
}

// snippetSource returns the Go file that builds s.
func snippetSource(s goBlock) (string, error) {
	code := s.code
	if strings.HasPrefix(strings.TrimSpace(code), "package ") {
		return code + "\n", nil
	}
	params, decls, _ := strings.Cut(s.context, "\n")
	expressions := false
	if rest, ok := strings.CutPrefix(params, "expressions"); ok {
		expressions, params = true, strings.TrimSpace(rest)
	}
	if rest, ok := strings.CutPrefix(params, "options"); ok {
		params = strings.TrimSpace(rest)
		code = "_ = []ratelimit.Option{\n" + code + "\n}"
	}
	if params == "" {
		params = "func()"
	}
	if !strings.HasPrefix(params, "func(") {
		return "", fmt.Errorf("the go:snippet comment's first line is %q: want the function's parameters, as func(name Type, ...)", params)
	}
	// Elisions: a line of "..." goes; "{ ... }" and "(...)" build empty.
	code = strings.ReplaceAll(code, "{ ... }", "{ /* ... */ }")
	code = strings.ReplaceAll(code, "(...)", "( /* ... */ )")
	code = strings.ReplaceAll(code, ", ...)", " /* , ... */)")
	var top, body []string
	lines := strings.Split(code, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "...":
		case strings.HasPrefix(l, "func ") || strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "var "):
			top = append(top, l)
			if strings.HasSuffix(l, "{") || strings.HasSuffix(l, "(") {
				for i++; i < len(lines); i++ {
					top = append(top, lines[i])
					if lines[i] == "}" || lines[i] == ")" {
						break
					}
				}
			}
		case expressions && strings.TrimSpace(l) != "":
			body = append(body, "_ = "+l)
		default:
			body = append(body, l)
		}
	}
	// Variables declared at the block's margin, used or not.
	declared := regexp.MustCompile(`^([A-Za-z_][\w]*(?:, *[A-Za-z_][\w]*)*) :?= `)
	var uses []string
	for _, l := range body {
		if m := declared.FindStringSubmatch(l); m != nil && strings.Contains(l, ":=") {
			for _, name := range strings.Split(m[1], ",") {
				if name = strings.TrimSpace(name); name != "_" && !slices.Contains(uses, name) {
					uses = append(uses, name)
				}
			}
		}
	}
	all := params + "\n" + decls + "\n" + strings.Join(top, "\n") + "\n" + strings.Join(body, "\n")
	var imports []string
	for name, path := range snippetImports {
		if regexp.MustCompile(`(^|[^\w.])` + name + `\.`).MatchString(all) {
			imports = append(imports, fmt.Sprintf("%s %q", name, path))
		}
	}
	slices.Sort(imports)
	var b strings.Builder
	b.WriteString("package snippet\n\n")
	if len(imports) > 0 {
		b.WriteString("import (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n")
	}
	if decls != "" {
		b.WriteString(decls + "\n\n")
	}
	if len(top) > 0 {
		b.WriteString(strings.Join(top, "\n") + "\n\n")
	}
	b.WriteString("var _ = " + params + " {\n")
	b.WriteString(strings.Join(body, "\n") + "\n")
	for _, name := range uses {
		b.WriteString("_ = " + name + "\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}
