package ginlimit

import (
	"strings"
	"testing"
)

// TestServeMuxPattern: Gin's patterns written the ServeMux way, with
// their shapes, and what ServeMux cannot write, or a method no request
// carries, refused with the reason.
func TestServeMuxPattern(t *testing.T) {
	tests := []struct {
		pattern, want, shape string
		problem              string // a substring of the problem; "" when written
	}{
		{"GET /users/:id", "GET /users/{id}", "GET /users/{}", ""},
		{"GET  /users/:name", "GET  /users/{name}", "GET /users/{}", ""},
		{"/files/*path", "/files/{path...}", "/files/{...}", ""},
		{"POST /login", "POST /login", "POST /login", ""},
		{"GET /", "GET /{$}", "GET /{$}", ""},
		{"/api/", "/api/{$}", "/api/{$}", ""},
		{"/a/:x/", "/a/{x}/{$}", "/a/{}/{$}", ""},
		{"/a/:x/b/:y", "/a/{x}/b/{y}", "/a/{}/b/{}", ""},
		{"GET /users/{id}", "", "", `"{id}" is ServeMux syntax; Gin writes a parameter ":id"`},
		{"/files/{path...}", "", "", `Gin writes the rest of a path "*path"`},
		{"/static/*", "", "", "fills a whole segment"},
		{"/users/:", "", "", "fills a whole segment"},
		{"/a/*rest/b", "", "", "a catch-all must end the path"},
		{"/a/:x:y", "", "", "fills a whole segment"},
		{"/v1/things:batchGet", "", "", "fills a whole segment"},
		{"users", "", "", "must start with '/'"},
		{"GET users/:id", "", "", "must start with '/'"},
		{"post /login", "", "", `the method "post" must be upper case, as requests carry it: "POST /login"`},
		{"Get /users/:id", "", "", `must be upper case, as requests carry it: "GET /users/:id"`},
		{"G(T /x", "", "", `the method "G(T" is not an HTTP method token`},
	}
	for _, tt := range tests {
		got, shape, problem := serveMuxPattern(tt.pattern)
		if got != tt.want || shape != tt.shape || tt.problem == "" && problem != "" || tt.problem != "" && !strings.Contains(problem, tt.problem) {
			t.Errorf("serveMuxPattern(%q) = %q, %q, %q; want %q, %q, %q", tt.pattern, got, shape, problem, tt.want, tt.shape, tt.problem)
		}
	}
}
