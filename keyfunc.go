package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// A KeyFunc names who a request is counted against: a client address, an
// API key, a user, a route. It returns an error wrapping [ErrNoKey] when
// the request carries no key; the limiter then hands the request to its
// error handler, never to a shared bucket.
//
// The built-in KeyFuncs tag their keys ("ip:", "header:", "user:",
// "route:"), so keys of different kinds never collide, and [Join] combines
// them without ambiguity.
type KeyFunc func(r *http.Request) (string, error)

// ErrNoKey is wrapped by the errors of KeyFuncs that find no key in a
// request: a missing header, no user in the context, no route pattern.
var ErrNoKey = errors.New("ratelimit: no key in request")

// Header keys requests by the value of the named header, such as an API
// key. A request without it, or with it empty, has no key. When the header
// appears more than once, the first value counts, as for
// [http.Header.Get].
func Header(name string) KeyFunc {
	name = textproto.CanonicalMIMEHeaderKey(name)
	tag := "header:" + name + ":"
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("%w: header %s is missing", ErrNoKey, name)
		}
		return tag + v, nil
	}
}

// User keys requests by a value that earlier middleware, typically
// authentication, stored in the request's context under ctxKey. The value
// must be a non-empty string or implement [fmt.Stringer].
func User(ctxKey any) KeyFunc {
	return func(r *http.Request) (string, error) {
		var id string
		switch v := r.Context().Value(ctxKey).(type) {
		case string:
			id = v
		case fmt.Stringer:
			id = v.String()
		}
		if id == "" {
			return "", fmt.Errorf("%w: no user in the request context", ErrNoKey)
		}
		return "user:" + id, nil
	}
}

// Route keys requests by method and matched route pattern, for example
// "route:POST /login", so that each route has its own counter. The pattern
// is the one the router matched: [http.Request.Pattern] with Go's
// ServeMux (the limiter must then run inside the mux, around a route's
// handler), or what a framework adapter passes with [RequestWithRoute].
// The raw URL path is never used: it would let clients mint keys at will.
func Route(r *http.Request) (string, error) {
	p := RoutePattern(r)
	if p == "" {
		return "", fmt.Errorf("%w: no route pattern (run the limiter inside the router, or through an adapter)", ErrNoKey)
	}
	if hasMethod(p) {
		return "route:" + p, nil
	}
	return "route:" + r.Method + " " + p, nil
}

// Join keys requests by all of keys together, for example an API key per
// route. Each part is prefixed with its length, so different parts can
// never join into the same key. If any part fails, Join fails.
func Join(keys ...KeyFunc) KeyFunc {
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for _, key := range keys {
			k, err := key(r)
			if err != nil {
				return "", err
			}
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
		}
		return b.String(), nil
	}
}

type routeKey struct{}

// RequestWithRoute returns a shallow copy of r that carries the route
// pattern a router matched, for [Route] and for per-route limits. Framework
// adapters call it; with Go's ServeMux, [http.Request.Pattern] serves.
func RequestWithRoute(r *http.Request, pattern string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, pattern))
}

// RoutePattern returns the route pattern a router matched for r, or "".
func RoutePattern(r *http.Request) string {
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
