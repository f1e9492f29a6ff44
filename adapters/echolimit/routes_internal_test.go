package echolimit

import (
	"strings"
	"testing"
)

// TestServeMuxPattern: Echo's patterns written the ServeMux way, with
// their shapes, and what ServeMux cannot write, or a method no request
// carries, refused with the reason.
func TestServeMuxPattern(t *testing.T) {
	tests := []struct {
		pattern, want, shape string
		problem              string // a substring of the problem; "" when written
	}{
		{"GET /users/:id", "GET /users/{id}", "GET /users/{}", ""},
		{"GET  /users/:name", "GET  /users/{name}", "GET /users/{}", ""},
		{"/static/*", "/static/{path...}", "/static/{...}", ""},
		{"/files/*name", "/files/{name...}", "/files/{...}", ""},
		{"POST /login", "POST /login", "POST /login", ""},
		{"GET /", "GET /{$}", "GET /{$}", ""},
		{"/api/", "/api/{$}", "/api/{$}", ""},
		{"/a/:x/", "/a/{x}/{$}", "/a/{}/{$}", ""},
		{"/users/{id}", "", "", `Echo writes a parameter ":id"`},
		{"/users/:", "", "", "needs a name"},
		{"/a/*/b", "", "", "a catch-all must end the path"},
		{"/v1/things:batchGet", "", "", "fills a whole segment"},
		{"users", "", "", "must start with '/'"},
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
