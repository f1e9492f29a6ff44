package framework

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/internal/httpmethod"
)

// A Syntax is how a router writes its route patterns when it names a
// parameter ":name" and the rest of a path "*name", as Gin and Echo do,
// and matches a path that ends in "/" alone. It writes them the way
// ServeMux does: ":name" as "{name}", a final "*name" as "{name...}", a
// final "/" as "/{$}". A Syntax is a plain value, safe for concurrent use.
type Syntax struct {
	// Router names the router in what a refused pattern is told: "Gin".
	Router string
	// Option names the option that takes a table in this syntax, in its
	// errors: "ginlimit.Routes".
	Option string
	// Rest is the name of the rest of a path written "*" alone, as Echo
	// writes it ("path" makes it "{path...}"). Empty, the default, a "*"
	// needs a name, as in Gin.
	Rest string
}

// Routes is [ratelimit.WithRoutes] for a route table in s, written the
// ServeMux way. A pattern ServeMux cannot write (a parameter inside a
// segment, "/v:version") or holding braces, a method not in upper case
// ("post /login") and two patterns of one shape ("/users/:id",
// "/users/:name") are refused, named, when the Limiter is built.
func (s Syntax) Routes(table map[string][]ratelimit.Limit) ratelimit.Option {
	mux := make(map[string][]ratelimit.Limit, len(table))
	shapes := make(map[string]string, len(table)) // a shape's pattern
	// Sorted, so that of two patterns of one shape the error names the same every time.
	for _, pattern := range slices.Sorted(maps.Keys(table)) {
		p, shape, problem := s.serveMux(pattern)
		if other, dup := shapes[shape]; problem == "" && dup {
			problem = fmt.Sprintf("%q is the same route, %s: the names of parameters do not matter, so the table cannot tell them apart", other, shape)
		}
		if problem != "" {
			return func(*ratelimit.Limiter) error {
				return fmt.Errorf("%w: %s: pattern %q: %s", ratelimit.ErrInvalid, s.Option, pattern, problem)
			}
		}
		shapes[shape] = pattern
		mux[p] = table[pattern]
	}
	return ratelimit.WithRoutes(mux)
}

const maxPatterns = 4096 // the routes a Patterns function keeps

// Patterns returns a function that writes the route a router matched
// (Gin's FullPath, Echo's c.Path()) the ServeMux way, or returns false for
// no route ("") or one ServeMux cannot write. It keeps up to 4,096 routes
// worked out, as they come back on every request. The function is safe
// for concurrent use; each middleware makes its own.
func (s Syntax) Patterns() func(route string) (pattern string, ok bool) {
	patterns := &bounded.Map[string, string]{Max: maxPatterns, Make: func(route string) string {
		p, _, _ := s.serveMux(route) // "" for a route ServeMux cannot write
		return p
	}}
	return func(route string) (string, bool) {
		if route == "" {
			return "", false
		}
		p := patterns.Get(route)
		return p, p != ""
	}
}

// serveMux writes a pattern of s the way ServeMux does, with its shape
// (the method, one space, and the path with each parameter's name left
// out, "{}" and "{...}"), or says why it cannot.
func (s Syntax) serveMux(pattern string) (muxPattern, shape, problem string) {
	method, path := "", pattern
	if i := strings.IndexByte(pattern, ' '); i > 0 && !strings.Contains(pattern[:i], "/") {
		method, path = pattern[:i], strings.TrimLeft(pattern[i+1:], " ")
	}
	if problem := httpmethod.Problem(method, path); problem != "" {
		return "", "", problem
	}
	if !strings.HasPrefix(path, "/") {
		return "", "", fmt.Sprintf("the path must start with '/' in %s's syntax", s.Router)
	}
	prefix, shapePrefix := pattern[:len(pattern)-len(path)], ""
	if method != "" {
		shapePrefix = method + " "
	}
	if !strings.ContainsAny(path, ":*{}") && !strings.HasSuffix(path, "/") {
		return pattern, shapePrefix + path, ""
	}
	named := "named " // a parameter ServeMux can write, when a "*" needs a name
	if s.Rest != "" {
		named = ""
	}
	segments := strings.Split(path, "/")
	shapes := slices.Clone(segments)
	for i, seg := range segments {
		j := strings.IndexAny(seg, ":*")
		switch {
		case strings.ContainsAny(seg, "{}"):
			name := strings.Trim(seg, "{}")
			if rest, ok := strings.CutSuffix(name, "..."); ok {
				return "", "", fmt.Sprintf("%q is ServeMux syntax; %s writes the rest of a path %q", seg, s.Router, "*"+rest)
			}
			return "", "", fmt.Sprintf("%q is ServeMux syntax; %s writes a parameter %q", seg, s.Router, ":"+name)
		case seg == "" && i > 0 && i == len(segments)-1:
			segments[i], shapes[i] = "{$}", "{$}" // the router matches "/users/" alone, as ServeMux "/users/{$}"
		case j < 0:
		case j > 0 || strings.ContainsAny(seg[1:], ":*") || len(seg) == 1 && s.Rest == "":
			return "", "", fmt.Sprintf("%q: ServeMux can only write a %sparameter that fills a whole segment", seg, named)
		case seg == ":":
			return "", "", fmt.Sprintf("%q: the parameter needs a name", seg)
		case seg[0] == ':':
			segments[i], shapes[i] = "{"+seg[1:]+"}", "{}"
		case i != len(segments)-1:
			return "", "", fmt.Sprintf("%q: a catch-all must end the path", seg)
		default:
			name := seg[1:]
			if name == "" {
				name = s.Rest
			}
			segments[i], shapes[i] = "{"+name+"...}", "{...}"
		}
	}
	return prefix + strings.Join(segments, "/"), shapePrefix + strings.Join(shapes, "/"), ""
}
