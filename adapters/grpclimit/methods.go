package grpclimit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ratelimit-go/ratelimit"
)

// Methods is [ratelimit.WithRoutes] for a table of gRPC methods:
// "/package.Service/Method" for one method, "/package.Service/*" for every
// method of a service, written as the routes an interceptor gives the
// Limiter ("POST /package.Service/Method", "POST /package.Service/{method}").
// A method's entry beats its service's, a method in neither gets the
// limits of [ratelimit.WithLimits], and the methods of a service's entry
// share its counters. The tables given to a Limiter are merged. An entry
// that is not a full method name ("/pkg.Svc/Get*", "/*/Get") is refused
// when the Limiter is built, by an error wrapping [ratelimit.ErrInvalid]
// that names it. See docs/grpc.md.
func Methods(table map[string][]ratelimit.Limit) ratelimit.Option {
	if table == nil {
		return func(*ratelimit.Limiter) error {
			return fmt.Errorf("%w: grpclimit.Methods: the table is nil", ratelimit.ErrInvalid)
		}
	}
	routes := make(map[string][]ratelimit.Limit, len(table))
	// In order, so that the error names the same bad entry every time.
	for _, name := range slices.Sorted(maps.Keys(table)) {
		pattern, problem := route(name)
		if problem != "" {
			return func(*ratelimit.Limiter) error {
				return fmt.Errorf("%w: grpclimit.Methods: %q: %s", ratelimit.ErrInvalid, name, problem)
			}
		}
		routes[pattern] = table[name]
	}
	return ratelimit.WithRoutes(routes)
}

// route writes an entry of a Methods table as a route pattern of
// ServeMux, or says why it cannot. Two valid entries never make one
// pattern: '{' is in no proto identifier.
func route(name string) (pattern, problem string) {
	path, ok := strings.CutPrefix(name, "/")
	if !ok {
		return "", `a full method name starts with '/': "/package.Service/Method"`
	}
	service, method, ok := strings.Cut(path, "/")
	switch {
	case !ok || strings.Contains(method, "/"):
		return "", `a full method name is a service and a method: "/package.Service/Method", or "/package.Service/*" for every method of the service`
	case service == "":
		return "", "the service is empty"
	case method == "":
		return "", `the method is empty; "/` + service + `/*" is every method of the service`
	case strings.Contains(service, "*"):
		return "", "a '*' stands for every method of one service, not for services"
	case strings.Contains(method, "*") && method != "*":
		return "", fmt.Sprintf("%q: a '*' stands for every method of the service, alone", method)
	}
	if problem := serviceProblem(service); problem != "" {
		return "", problem
	}
	if method == "*" {
		return "POST /" + service + "/{method}", ""
	}
	if !identifier(method) {
		return "", fmt.Sprintf("the method %q is not a proto identifier: letters, digits and '_', not starting with a digit", method)
	}
	return "POST " + name, ""
}

// serviceProblem says what is wrong with a service's full name, or "".
func serviceProblem(service string) string {
	for part := range strings.SplitSeq(service, ".") {
		if !identifier(part) {
			return fmt.Sprintf("the service %q is not a proto full name: identifiers (letters, digits and '_', not starting with a digit) joined by '.'", service)
		}
	}
	return ""
}

// identifier reports whether s is a proto identifier.
func identifier(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
