// Package routesyntax knows how each router this module serves writes its
// route patterns, so that a route table in the wrong syntax is refused
// when its Limiter is built instead of never matching. The framework
// adapters reach the root package's route tables through its hooks.
package routesyntax

import (
	"fmt"
	"strings"
)

// Syntax is a router's way of writing route patterns.
type Syntax uint8

const (
	// ServeMux is Go's net/http ServeMux, whose syntax chi shares for
	// parameters: "GET /users/{id}", "/files/{path...}".
	ServeMux Syntax = iota
	// Gin: "GET /users/:id", "/files/*path".
	Gin
	// Echo: "GET /users/:id", "/files/*".
	Echo
)

func (s Syntax) String() string {
	switch s {
	case Gin:
		return "Gin"
	case Echo:
		return "Echo"
	}
	return "Go's ServeMux"
}

// Check says what is wrong with pattern (a path, after an optional
// method and space) in syntax s, or returns "".
func Check(s Syntax, pattern string) string {
	path := pattern
	if i := strings.IndexByte(pattern, ' '); i > 0 && !strings.Contains(pattern[:i], "/") {
		path = strings.TrimLeft(pattern[i+1:], " ")
	}
	if s != ServeMux && !strings.HasPrefix(path, "/") {
		return fmt.Sprintf("the path must start with '/' in %v's syntax", s)
	}
	segments := strings.Split(path, "/")
	for i, seg := range segments {
		last := i == len(segments)-1
		switch s {
		case ServeMux:
			if strings.HasPrefix(seg, ":") {
				return fmt.Sprintf("%q is Gin and Echo syntax; %v writes a parameter %q", seg, s, "{"+seg[1:]+"}")
			}
			if strings.HasPrefix(seg, "*") {
				return fmt.Sprintf("%q is chi, Gin and Echo syntax; %v writes the rest of a path %q", seg, s, "{"+strings.TrimPrefix(seg, "*")+"...}")
			}
		default:
			if strings.ContainsAny(seg, "{}") {
				name := strings.Trim(seg, "{}")
				if rest, ok := strings.CutSuffix(name, "..."); ok {
					return fmt.Sprintf("%q is the syntax of Go's ServeMux and chi; %v writes the rest of a path %q", seg, s, "*"+rest)
				}
				return fmt.Sprintf("%q is the syntax of Go's ServeMux and chi; %v writes a parameter %q", seg, s, ":"+name)
			}
			if j := strings.IndexAny(seg, ":*"); j >= 0 {
				wild, name := seg[j], seg[j+1:]
				switch {
				case wild == '*' && !last:
					return fmt.Sprintf("%q: a catch-all must end the path in %v's syntax", seg, s)
				case name == "" && (wild == ':' || s == Gin):
					return fmt.Sprintf("%q: the parameter needs a name in %v's syntax", seg, s)
				case strings.ContainsAny(name, ":*"):
					return fmt.Sprintf("%q holds two parameters; %v allows one per segment", seg, s)
				}
			}
		}
	}
	return ""
}

// The root package sets these hooks when it is initialized.
var (
	// WithRoutes returns ratelimit.WithRoutes for a table in syntax s:
	// table is a map[string][]ratelimit.Limit, the result a
	// ratelimit.Option.
	WithRoutes func(s Syntax, table any) any
	// Of returns the syntax of a *ratelimit.Limiter's route table, and
	// false when it has none.
	Of func(limiter any) (Syntax, bool)
)
