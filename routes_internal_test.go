package ratelimit

import "testing"

// TestAppendShape: patterns that match the same requests have one shape,
// whatever their wildcards are called and however their method is spaced.
func TestAppendShape(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{"GET /users/{id}", "GET /users/{}"},
		{"GET  /users/{name}", "GET /users/{}"},
		{"GET\t/users/{name}", "GET /users/{}"},
		{"/files/{path...}", "/files/{...}"},
		{"/teams/{t}/members/{m}/", "/teams/{}/members/{}/"},
		{"GET /{$}", "GET /{$}"},
		{"/a/{x}/{$}", "/a/{}/{$}"},
		{"api.example.com/users/{u}", "api.example.com/users/{}"},
		{"DELETE api.example.com/{rest...}", "DELETE api.example.com/{...}"},
		{"POST /login", "POST /login"},
		{"/unclosed/{x", "/unclosed/{x"},
	}
	for _, tt := range tests {
		if got := string(appendShape(nil, tt.pattern)); got != tt.want {
			t.Errorf("appendShape(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
	}
}

// TestCheckMethod: a method must be an upper-case HTTP method token, and
// the reason says how to write it.
func TestCheckMethod(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{"POST /login", ""},
		{"/login", ""},
		{"M-SEARCH /", ""},
		{"api.example.com/x", ""},
		{"post /login", `the method "post" must be upper case, as requests carry it: "POST /login"`},
		{"Get  /users/{id}", `the method "Get" must be upper case, as requests carry it: "GET /users/{id}"`},
		{"G(T /x", `the method "G(T" is not an HTTP method token`},
	}
	for _, tt := range tests {
		if got := checkMethod(tt.pattern); got != tt.want {
			t.Errorf("checkMethod(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
	}
}
