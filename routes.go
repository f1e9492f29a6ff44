package ratelimit

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

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
	method, rest := splitMethod(pattern)
	lower := false
	for i := 0; i < len(method); i++ {
		c := method[i]
		switch {
		case 'a' <= c && c <= 'z':
			lower = true
		case 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return fmt.Sprintf("the method %q is not an HTTP method token", method)
		}
	}
	if lower {
		return fmt.Sprintf("the method %q must be upper case, as requests carry it: %q", method, strings.ToUpper(method)+" "+rest)
	}
	return ""
}

// lookup returns the table's entry for the route a router matched,
// pattern (r.Pattern, or the table's own pattern when the Limiter matched
// r against its table), by shape: the names of its wildcards do not
// matter. As with ServeMux, an entry for r's host wins over one for every
// host, and one for the route's method (r's method, when pattern has
// none) over one for every method; and a route that ends in "/{$}" gets
// the entry that ends in "/", which covers it, when the table does not
// name the route itself.
func (l *Limiter) lookup(r *http.Request, pattern string) (route, bool) {
	method, path := splitMethod(pattern)
	if method == "" {
		method = r.Method
	}
	var host string // r's host, as ServeMux reads it, when the table has hosts
	if l.hosts && strings.HasPrefix(path, "/") {
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
	var buf [128]byte
	for pass := range 2 {
		h := ""
		if pass == 0 {
			if host == "" {
				continue
			}
			h = host
		}
		for _, p := range paths {
			if p == "" {
				continue
			}
			for _, m := range [2]string{method, ""} {
				b := buf[:0]
				if m != "" {
					b = append(b, m...)
					b = append(b, ' ')
				}
				b = append(b, h...)
				b = appendShape(b, p)
				if rt, ok := l.routes[string(b)]; ok {
					return rt, true
				}
			}
		}
	}
	return route{}, false
}
