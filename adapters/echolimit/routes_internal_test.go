package echolimit

import (
	"strings"
	"testing"
)

// TestServeMuxPattern: Echo's patterns written the ServeMux way, and what
// ServeMux cannot write refused with the reason.
func TestServeMuxPattern(t *testing.T) {
	tests := []struct {
		pattern, want string
		problem       string // a substring of the problem; "" when written
	}{
		{"GET /users/:id", "GET /users/{id}", ""},
		{"/static/*", "/static/{path...}", ""},
		{"/files/*name", "/files/{name...}", ""},
		{"POST /login", "POST /login", ""},
		{"/users/{id}", "", `Echo writes a parameter ":id"`},
		{"/users/:", "", "needs a name"},
		{"/a/*/b", "", "a catch-all must end the path"},
		{"/v1/things:batchGet", "", "fills a whole segment"},
		{"users", "", "must start with '/'"},
	}
	for _, tt := range tests {
		got, problem := serveMuxPattern(tt.pattern)
		if got != tt.want || tt.problem == "" && problem != "" || tt.problem != "" && !strings.Contains(problem, tt.problem) {
			t.Errorf("serveMuxPattern(%q) = %q, %q; want %q, %q", tt.pattern, got, problem, tt.want, tt.problem)
		}
	}
}
