package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// routes is a Limiter's route table: the policy of each pattern of
// WithRoutes, and a matcher for requests whose pattern is not known yet.
type routes struct {
	policies map[string]*policy // by pattern, as given
	match    *http.ServeMux     // the patterns, for requests without one
}

// newRoutes builds the table of WithRoutes.
func newRoutes(namespace string, table map[string][]Limit) (*routes, error) {
	t := &routes{policies: make(map[string]*policy, len(table)), match: http.NewServeMux()}
	for pattern, limits := range table {
		if pattern == "" || strings.ContainsAny(pattern, "|\x00") {
			return nil, fmt.Errorf("%w: WithRoutes: pattern %q is empty or holds '|' or NUL", ErrInvalid, pattern)
		}
		if err := register(t.match, pattern); err != nil {
			return nil, fmt.Errorf("%w: WithRoutes: pattern %q: %v", ErrInvalid, pattern, err)
		}
		p, problem := newPolicy(namespace, pattern, limits)
		if problem != "" {
			return nil, fmt.Errorf("%w: WithRoutes[%q]: %s", ErrInvalid, pattern, problem)
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
	pattern := routePattern(r)
	if pattern == "" {
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

type routeKey struct{}

// RequestWithRoute returns a shallow copy of r that carries the route
// pattern a router matched, for [Route] and for [WithRoutes]. Framework
// adapters call it; with Go's ServeMux, [http.Request.Pattern] serves.
func RequestWithRoute(r *http.Request, pattern string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, pattern))
}

// routePattern returns the route pattern a router matched for r, or "".
func routePattern(r *http.Request) string {
	if p, ok := r.Context().Value(routeKey{}).(string); ok {
		return p
	}
	return r.Pattern
}

// hasMethod reports whether a pattern starts with a method, like
// "POST /login".
func hasMethod(pattern string) bool {
	i := strings.IndexByte(pattern, ' ')
	return i > 0 && !strings.Contains(pattern[:i], "/")
}
