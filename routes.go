package ratelimit

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/httpmethod"
)

// routeTable is the table of WithRoutes, as a Limiter reads it: its
// entries by shape (see appendShape), a ServeMux of its patterns, for
// requests that have none, and whether a pattern names a host. A nil
// *routeTable has no entries.
type routeTable struct {
	entries map[string]route
	mux     *http.ServeMux
	hosts   bool
}

// newRoutes checks the table of WithRoutes and makes its policies from
// base.
func newRoutes(base policyBase, table map[string][]Limit) (*routeTable, error) {
	t := &routeTable{entries: make(map[string]route, len(table)), mux: http.NewServeMux()}
	// In order, so that of two patterns of one shape the error names
	// the same one first every time.
	for _, pattern := range slices.Sorted(maps.Keys(table)) {
		if pattern == "" || strings.ContainsAny(pattern, "|\x00") {
			return nil, fmt.Errorf("%w: WithRoutes: pattern %q is empty or holds '|' or NUL", ErrInvalid, pattern)
		}
		if problem := checkServeMuxSyntax(pattern); problem != "" {
			return nil, fmt.Errorf("%w: WithRoutes: pattern %q: %s", ErrInvalid, pattern, problem)
		}
		shape := string(appendShape(nil, pattern))
		if other, dup := t.entries[shape]; dup {
			return nil, fmt.Errorf("%w: WithRoutes: patterns %q and %q are one route, %s: the names of parameters do not matter, so the table cannot tell them apart", ErrInvalid, other.pattern, pattern, shape)
		}
		if err := register(t.mux, pattern); err != nil {
			return nil, fmt.Errorf("%w: WithRoutes: pattern %q: %v", ErrInvalid, pattern, err)
		}
		p, problem := base.newPolicy(pattern, table[pattern])
		if problem != "" {
			return nil, fmt.Errorf("%w: WithRoutes[%q]: %s", ErrInvalid, pattern, problem)
		}
		t.entries[shape] = route{pattern: pattern, policy: p}
		_, rest := splitMethod(pattern)
		t.hosts = t.hosts || !strings.HasPrefix(rest, "/")
	}
	return t, nil
}

// checkServeMuxSyntax says what in a pattern is another router's syntax,
// which ServeMux would take for literal text, or a method that is not
// upper case, which no request carries; or it returns "".
func checkServeMuxSyntax(pattern string) string {
	if problem := checkMethod(pattern); problem != "" {
		return problem
	}
	_, path := splitMethod(pattern)
	for seg := range strings.SplitSeq(path, "/") {
		switch {
		case strings.HasPrefix(seg, ":"):
			return fmt.Sprintf("%q is Gin and Echo syntax; ServeMux writes a parameter %q (with Gin or Echo, ginlimit.Routes and echolimit.Routes take their syntax)", seg, "{"+seg[1:]+"}")
		case strings.HasPrefix(seg, "*"):
			return fmt.Sprintf("%q is chi, Gin and Echo syntax; ServeMux writes the rest of a path %q (with Gin or Echo, ginlimit.Routes and echolimit.Routes take their syntax)", seg, "{"+strings.TrimPrefix(seg, "*")+"...}")
		}
	}
	return ""
}

// register adds pattern to mux, turning ServeMux's panic on a bad or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}

// match returns the entry of r's route: the route is r.Pattern, the one
// its router matched; when there is none, r is matched against the
// table's patterns with the rules of ServeMux. Either way the entry is
// the one of the route's shape (see lookup), so that where the Limiter
// sits and what the parameters are called do not change the answer.
func (t *routeTable) match(r *http.Request) (route, bool) {
	if t == nil {
		return route{}, false
	}
	pattern := r.Pattern
	if pattern == "" {
		if _, pattern = t.mux.Handler(r); pattern == "" {
			return route{}, false
		}
	}
	return t.lookup(r, pattern)
}

// route is an entry of the table of WithRoutes: its pattern, as given,
// and its policy.
type route struct {
	pattern string
	policy  *policy
}

// splitMethod splits a ServeMux pattern into its method, "" when it has
// none, and the rest: the host, if any, and the path.
func splitMethod(pattern string) (method, rest string) {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '/':
			return "", pattern // a path, or a host and a path
		case ' ', '\t':
			if i == 0 {
				return "", pattern
			}
			j := i + 1
			for j < len(pattern) && (pattern[j] == ' ' || pattern[j] == '\t') {
				j++
			}
			return pattern[:i], pattern[j:]
		}
	}
	return "", pattern
}

// appendShape appends to b the shape of a ServeMux pattern: the pattern
// with one space after its method, and each wildcard's name left out,
// "{}" for a segment's and "{...}" for the rest of the path ("{$}"
// stays). Patterns of one shape match the same requests: "GET
// /users/{id}" and "GET  /users/{name}" are both "GET /users/{}".
func appendShape(b []byte, pattern string) []byte {
	if method, rest := splitMethod(pattern); method != "" {
		b = append(b, method...)
		b = append(b, ' ')
		pattern = rest
	}
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return append(b, pattern...)
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			return append(b, pattern...)
		}
		b = append(b, pattern[:i]...)
		switch name := pattern[i+1 : i+j]; {
		case name == "$":
			b = append(b, "{$}"...)
		case strings.HasSuffix(name, "..."):
			b = append(b, "{...}"...)
		default:
			b = append(b, "{}"...)
		}
		pattern = pattern[i+j+1:]
	}
}

// checkMethod says what is wrong with the method of a pattern, or returns
// "": it must be an HTTP method token, in upper case, as a router writes
// it and a request carries it; "post" would never match.
func checkMethod(pattern string) string {
	return httpmethod.Problem(splitMethod(pattern))
}

// lookup returns the table's entry for the route a router matched,
// pattern (r.Pattern, or the table's own pattern when the Limiter matched
// r against its table), by shape: the names of its wildcards do not
// matter. As with ServeMux, an entry for r's host wins over one for every
// host, and one for the route's method (r's method, when pattern has
// none) over one for every method; and a route that ends in "/{$}" gets
// the entry that ends in "/", which covers it, when the table does not
// name the route itself.
func (t *routeTable) lookup(r *http.Request, pattern string) (route, bool) {
	method, path := splitMethod(pattern)
	if method == "" {
		method = r.Method
	}
	var host string // r's host, as ServeMux reads it, when the table has hosts
	if t.hosts && strings.HasPrefix(path, "/") {
		host = r.Host
		if strings.Contains(host, ":") {
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
		}
	}
	paths := [2]string{path}
	if p, ok := strings.CutSuffix(path, "{$}"); ok {
		paths[1] = p
	}
	for i, h := range [2]string{host, ""} {
		if i == 0 && h == "" {
			continue // no host to try first
		}
		for _, p := range paths {
			if p == "" {
				continue
			}
			if rt, ok := t.entry(method, h, p, ""); ok {
				return rt, true
			}
		}
	}
	return route{}, false
}

// entry returns the entry of host and the shape of path, followed by
// wildcard, for method first, then for every method.
func (t *routeTable) entry(method, host, path, wildcard string) (route, bool) {
	var buf [128]byte
	for _, m := range [2]string{method, ""} {
		b := buf[:0]
		if m != "" {
			b = append(b, m...)
			b = append(b, ' ')
		}
		b = append(b, host...)
		b = appendShape(b, path)
		b = append(b, wildcard...)
		if rt, ok := t.entries[string(b)]; ok {
			return rt, true
		}
	}
	return route{}, false
}

// matchRoute returns the entry of a route named outside HTTP (see
// [Request].Route): the entry of its shape, with and without its method,
// as lookup finds it; or, for a path, the entry whose last segment, or
// the rest of the path from some segment on, a wildcard stands for, the
// longest literal part first ("POST /shop.Orders/Create" gets the
// entry of "POST /shop.Orders/{method}"). An empty route has none.
func (t *routeTable) matchRoute(name string) (route, bool) {
	if t == nil || name == "" {
		return route{}, false
	}
	method, path := splitMethod(name)
	if rt, ok := t.entry(method, "", path, ""); ok {
		return rt, true
	}
	if !strings.HasPrefix(path, "/") {
		return route{}, false
	}
	if i := strings.LastIndexByte(path, '/'); i >= 0 && i < len(path)-1 {
		if rt, ok := t.entry(method, "", path[:i+1], "{}"); ok {
			return rt, true
		}
	}
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] != '/' {
			continue
		}
		if rt, ok := t.entry(method, "", path[:i+1], "{...}"); ok {
			return rt, true
		}
	}
	return route{}, false
}
