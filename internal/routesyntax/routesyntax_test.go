package routesyntax

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		syntax  Syntax
		pattern string
		want    string // a substring of the problem; "" when valid
	}{
		{ServeMux, "GET /users/{id}", ""},
		{ServeMux, "/files/{path...}", ""},
		{ServeMux, "POST /login", ""},
		{ServeMux, "example.com/", ""},
		{ServeMux, "GET /users/:id", `":id" is Gin and Echo syntax; Go's ServeMux writes a parameter "{id}"`},
		{ServeMux, "/static/*", `"*" is chi, Gin and Echo syntax; Go's ServeMux writes the rest of a path "{...}"`},
		{ServeMux, "/files/*path", `"{path...}"`},
		{Gin, "GET /users/:id", ""},
		{Gin, "/files/*path", ""},
		{Gin, "/v1/things:batchGet", ""},
		{Gin, "GET /users/{id}", `"{id}" is the syntax of Go's ServeMux and chi; Gin writes a parameter ":id"`},
		{Gin, "/files/{path...}", `Gin writes the rest of a path "*path"`},
		{Gin, "/static/*", "the parameter needs a name in Gin's syntax"},
		{Gin, "/users/:", "needs a name"},
		{Gin, "/a/*rest/b", "a catch-all must end the path"},
		{Gin, "/a/:x:y", "holds two parameters"},
		{Gin, "users", "must start with '/'"},
		{Echo, "GET /users/:id", ""},
		{Echo, "/static/*", ""},
		{Echo, "/users/{id}", `Echo writes a parameter ":id"`},
		{Echo, "/users/:", "needs a name"},
		{Echo, "/a/*/b", "a catch-all must end the path"},
	}
	for _, tt := range tests {
		got := Check(tt.syntax, tt.pattern)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("Check(%v, %q) = %q, want %q", tt.syntax, tt.pattern, got, tt.want)
		}
	}
}
