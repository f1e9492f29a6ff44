// Package httpmethod checks the method of a route pattern, for the
// Limiter's route tables and the adapters' tables in a router's syntax
// alike, so that both refuse the same methods with the same words.
package httpmethod

import (
	"fmt"
	"strings"
)

// Problem says what is wrong with the method of a pattern whose path is
// path, or returns "": it must be an HTTP method token, in upper case, as
// a router writes it and a request carries it; "post" would never match.
// An empty method, a pattern for every method, is fine.
func Problem(method, path string) string {
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
		return fmt.Sprintf("the method %q must be upper case, as requests carry it: %q", method, strings.ToUpper(method)+" "+path)
	}
	return ""
}
