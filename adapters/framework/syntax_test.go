package framework

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

var (
	gin  = Syntax{Router: "Gin", Option: "ginlimit.Routes"}
	echo = Syntax{Router: "Echo", Option: "echolimit.Routes", Rest: "path"}
)

// TestServeMux: Gin's and Echo's patterns written the ServeMux way, with
// their shapes, and what ServeMux cannot write, or a method no request
// carries, refused with the reason.
func TestServeMux(t *testing.T) {
	tests := []struct {
		syntaxes             []Syntax // nil: both
		pattern, want, shape string
		problem              string // a substring of the problem; "" when written
	}{
		{nil, "GET /users/:id", "GET /users/{id}", "GET /users/{}", ""},
		{nil, "GET  /users/:name", "GET  /users/{name}", "GET /users/{}", ""},
		{nil, "/files/*path", "/files/{path...}", "/files/{...}", ""},
		{nil, "POST /login", "POST /login", "POST /login", ""},
		{nil, "GET /", "GET /{$}", "GET /{$}", ""},
		{nil, "/api/", "/api/{$}", "/api/{$}", ""},
		{nil, "/a/:x/", "/a/{x}/{$}", "/a/{}/{$}", ""},
		{nil, "/a/:x/b/:y", "/a/{x}/b/{y}", "/a/{}/b/{}", ""},
		{nil, "/a/*rest/b", "", "", `"*rest": a catch-all must end the path`},
		{nil, "/a/:x:y", "", "", "fills a whole segment"},
		{nil, "GET users/:id", "", "", "must start with '/'"},
		{nil, "post /login", "", "", `the method "post" must be upper case, as requests carry it: "POST /login"`},
		{nil, "Get /users/:id", "", "", `must be upper case, as requests carry it: "GET /users/:id"`},
		{nil, "G(T /x", "", "", `the method "G(T" is not an HTTP method token`},
		{[]Syntax{gin}, "GET /users/{id}", "", "", `"{id}" is ServeMux syntax; Gin writes a parameter ":id"`},
		{[]Syntax{gin}, "/files/{path...}", "", "", `"{path...}" is ServeMux syntax; Gin writes the rest of a path "*path"`},
		{[]Syntax{gin}, "/static/*", "", "", `"*": ServeMux can only write a named parameter that fills a whole segment`},
		{[]Syntax{gin}, "/users/:", "", "", `":": ServeMux can only write a named parameter that fills a whole segment`},
		{[]Syntax{gin}, "/v1/things:batchGet", "", "", `"things:batchGet": ServeMux can only write a named parameter that fills a whole segment`},
		{[]Syntax{gin}, "users", "", "", "the path must start with '/' in Gin's syntax"},
		{[]Syntax{echo}, "/users/{id}", "", "", `"{id}" is ServeMux syntax; Echo writes a parameter ":id"`},
		{[]Syntax{echo}, "/static/*", "/static/{path...}", "/static/{...}", ""},
		{[]Syntax{echo}, "/users/:", "", "", `":": the parameter needs a name`},
		{[]Syntax{echo}, "/a/*/b", "", "", `"*": a catch-all must end the path`},
		{[]Syntax{echo}, "/v1/things:batchGet", "", "", `"things:batchGet": ServeMux can only write a parameter that fills a whole segment`},
		{[]Syntax{echo}, "users", "", "", "the path must start with '/' in Echo's syntax"},
	}
	for _, tt := range tests {
		if tt.syntaxes == nil {
			tt.syntaxes = []Syntax{gin, echo}
		}
		for _, s := range tt.syntaxes {
			got, shape, problem := s.serveMux(tt.pattern)
			if got != tt.want || shape != tt.shape || tt.problem == "" && problem != "" || tt.problem != "" && !strings.Contains(problem, tt.problem) {
				t.Errorf("%s: serveMux(%q) = %q, %q, %q; want %q, %q, %q", s.Router, tt.pattern, got, shape, problem, tt.want, tt.shape, tt.problem)
			}
		}
	}
}

// TestPatterns: a route is written the ServeMux way, and none is had for
// no route or a route ServeMux cannot write, past the bound too.
func TestPatterns(t *testing.T) {
	pattern := gin.Patterns()
	for range 2 { // worked out, then kept
		for route, want := range map[string]string{"/users/:id": "/users/{id}", "": "", "/v:version": "", "GET /": "GET /{$}"} {
			if got, ok := pattern(route); got != want || ok != (want != "") {
				t.Errorf("pattern(%q) = %q, %t; want %q, %t", route, got, ok, want, want != "")
			}
		}
	}
	for i := range maxPatterns {
		pattern("/r" + strings.Repeat("x", i))
	}
	if got, ok := pattern("/past/:bound"); got != "/past/{bound}" || !ok {
		t.Errorf("a route past the bound: got %q, %t; want %q, true", got, ok, "/past/{bound}")
	}
}

// TestRoutes: of two patterns of one shape, the error names the later
// one, in order, and the option.
func TestRoutes(t *testing.T) {
	for _, tt := range []struct {
		syntax Syntax
		table  []string
		want   string
	}{
		{gin, []string{"GET /users/:id", "GET /users/:name"}, `ratelimit: invalid input: ginlimit.Routes: pattern "GET /users/:name": "GET /users/:id" is the same route, GET /users/{}: the names of parameters do not matter, so the table cannot tell them apart`},
		{gin, []string{"/files/*path", "/files/*other"}, `ginlimit.Routes: pattern "/files/*path": "/files/*other" is the same route, /files/{...}`},
		{echo, []string{"/files/*", "/files/*other"}, `echolimit.Routes: pattern "/files/*other": "/files/*" is the same route, /files/{...}`},
	} {
		table := map[string][]ratelimit.Limit{tt.table[0]: {ratelimit.PerMinute(1)}, tt.table[1]: {ratelimit.PerMinute(2)}}
		s, err := store.NewMemory(store.MemoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ratelimit.New(s, "test", tt.syntax.Routes(table)); !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want an ErrInvalid saying %q", tt.table, err, tt.want)
		}
	}
}
