package ratelimit

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/routesyntax"
)

// routes is a Limiter's route table: the policy of each pattern of
// WithRoutes, and a matcher for requests whose pattern is not known yet.
type routes struct {
	policies map[string]*policy // by pattern, as given
	syntax   routesyntax.Syntax // the router's, which the patterns are in
	match    *http.ServeMux     // ServeMux syntax: the patterns, for requests without one
}

func init() {
	routesyntax.WithRoutes = func(s routesyntax.Syntax, table any) any {
		return withRoutes(s, table.(map[string][]Limit))
	}
	routesyntax.Of = func(x any) (routesyntax.Syntax, bool) {
		if l, ok := x.(*Limiter); ok && l.routes != nil {
			return l.routes.syntax, true
		}
		return 0, false
	}
}

// withRoutes is WithRoutes for a table in syntax s.
func withRoutes(s routesyntax.Syntax, table map[string][]Limit) Option {
	return func(l *Limiter) (err error) {
		l.routes, err = newRoutes(l.namespace, s, table)
		return err
	}
}

// newRoutes builds the table of WithRoutes, whose patterns are in syntax
// s.
func newRoutes(namespace string, s routesyntax.Syntax, table map[string][]Limit) (*routes, error) {
	option := map[routesyntax.Syntax]string{routesyntax.ServeMux: "WithRoutes", routesyntax.Gin: "ginlimit.Routes", routesyntax.Echo: "echolimit.Routes"}[s]
	t := &routes{policies: make(map[string]*policy, len(table)), syntax: s}
	if s == routesyntax.ServeMux {
		t.match = http.NewServeMux()
	}
	for pattern, limits := range table {
		if pattern == "" || strings.ContainsAny(pattern, "|\x00") {
			return nil, fmt.Errorf("%w: %s: pattern %q is empty or holds '|' or NUL", ErrInvalid, option, pattern)
		}
		if problem := routesyntax.Check(s, pattern); problem != "" {
			return nil, fmt.Errorf("%w: %s: pattern %q: %s", ErrInvalid, option, pattern, problem)
		}
		if t.match != nil {
			if err := register(t.match, pattern); err != nil {
				return nil, fmt.Errorf("%w: %s: pattern %q: %v", ErrInvalid, option, pattern, err)
			}
		}
		p, problem := newPolicy(namespace, pattern, limits)
		if problem != "" {
			return nil, fmt.Errorf("%w: %s[%q]: %s", ErrInvalid, option, pattern, problem)
		}
		t.policies[pattern] = p
	}
	return t, nil
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

// find returns the policy of r's route and its pattern as the table has
// it, or nil. A pattern given without a method matches every method; one
// with a method, only that one.
func (t *routes) find(r *http.Request) (*policy, string) {
	pattern := routerPattern(r)
	if pattern == "" && t.match != nil {
		_, pattern = t.match.Handler(r)
	}
	if p, ok := t.policies[pattern]; ok {
		return p, pattern
	}
	if i := strings.IndexByte(pattern, ' '); hasMethod(pattern) {
		pattern = pattern[i+1:]
	} else {
		pattern = r.Method + " " + pattern
	}
	if p, ok := t.policies[pattern]; ok {
		return p, pattern
	}
	return nil, ""
}

// RequestWithRoute returns r carrying the route pattern a router matched,
// for [RoutePattern], [Route] and [WithRoutes]: a shallow copy of r, or r
// itself when a Limiter or an earlier call already gave r a context of
// its own (then it records pattern there). Framework adapters call it; with
// Go's ServeMux, [http.Request.Pattern] serves.
func RequestWithRoute(r *http.Request, pattern string) *http.Request {
	r, s := withState(r)
	s.route = pattern
	return r
}

// RoutePattern returns the route pattern r matched, or "" when none is
// known: the one its router matched ([http.Request.Pattern], or what an
// adapter passed to [RequestWithRoute]), else, once a Limiter with
// [WithRoutes] has matched r against its table, that entry's pattern.
// A [WithCost] or [WithLimitsFunc] function can call it on the request
// it is given.
func RoutePattern(r *http.Request) string {
	if p := routerPattern(r); p != "" {
		return p
	}
	if s := stateOf(r); s != nil {
		return s.matched
	}
	return ""
}

// routerPattern returns the route pattern r's router matched, or "".
func routerPattern(r *http.Request) string {
	if s := stateOf(r); s != nil && s.route != "" {
		return s.route
	}
	return r.Pattern
}

// hasMethod reports whether a pattern starts with a method, like
// "POST /login".
func hasMethod(pattern string) bool {
	i := strings.IndexByte(pattern, ' ')
	return i > 0 && !strings.Contains(pattern[:i], "/")
}
