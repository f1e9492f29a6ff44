package ginlimit

import (
	"strings"
	"testing"
)

// TestServeMuxPattern: Gin's patterns written the ServeMux way, and what
// ServeMux cannot write refused with the reason.
func TestServeMuxPattern(t *testing.T) {
	tests := []struct {
		pattern, want string
		problem       string // a substring of the problem; "" when written
	}{
		{"GET /users/:id", "GET /users/{id}", ""},
		{"/files/*path", "/files/{path...}", ""},
		{"POST /login", "POST /login", ""},
		{"/a/:x/b/:y", "/a/{x}/b/{y}", ""},
		{"GET /users/{id}", "", `"{id}" is ServeMux syntax; Gin writes a parameter ":id"`},
		{"/files/{path...}", "", `Gin writes the rest of a path "*path"`},
		{"/static/*", "", "fills a whole segment"},
		{"/users/:", "", "fills a whole segment"},
		{"/a/*rest/b", "", "a catch-all must end the path"},
		{"/a/:x:y", "", "fills a whole segment"},
		{"/v1/things:batchGet", "", "fills a whole segment"},
		{"users", "", "must start with '/'"},
		{"GET users/:id", "", "must start with '/'"},
	}
	for _, tt := range tests {
		got, problem := serveMuxPattern(tt.pattern)
		if got != tt.want || tt.problem == "" && problem != "" || tt.problem != "" && !strings.Contains(problem, tt.problem) {
			t.Errorf("serveMuxPattern(%q) = %q, %q; want %q, %q", tt.pattern, got, problem, tt.want, tt.problem)
		}
	}
}
