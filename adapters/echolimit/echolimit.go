// Package echolimit runs a [ratelimit.Limiter] as Echo middleware.
//
// It only translates Echo's context: the decision, the keys and the
// headers are the Limiter's, exactly as with net/http. Echo's routes are
// written the way Go's ServeMux writes them ("/users/:id" as
// "/users/{id}", "/files/*" as "/files/{path...}"), so a Limiter's route
// table, its keys and what an observer is told are the same under Echo as
// under net/http. It takes the same options, with the same names, as the
// Gin adapter.
//
//	limiter, err := ratelimit.New(store, "api", ratelimit.WithLimits(ratelimit.PerMinute(100)))
//	...
//	e.Use(echolimit.New(limiter))
package echolimit

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ratelimit-go/ratelimit"
)

// Routes is [ratelimit.WithRoutes] for a route table in Echo's syntax,
// the patterns as Echo's c.Path() names them, with or without a method:
// "GET /users/:id", "/files/*". It writes them the ServeMux way and
// passes them to WithRoutes, which also takes a table written that way.
// A pattern that ServeMux cannot write (a parameter inside a segment, such
// as "/v:version") or that holds braces is refused when the Limiter is
// built, naming the pattern.
func Routes(table map[string][]ratelimit.Limit) ratelimit.Option {
	mux := make(map[string][]ratelimit.Limit, len(table))
	for pattern, limits := range table {
		p, problem := serveMuxPattern(pattern)
		if problem == "" {
			if _, dup := mux[p]; dup {
				problem = "another pattern of the table is the same route, " + p + " as ServeMux writes it"
			}
		}
		if problem != "" {
			return func(*ratelimit.Limiter) error {
				return fmt.Errorf("%w: echolimit.Routes: pattern %q: %s", ratelimit.ErrInvalid, pattern, problem)
			}
		}
		mux[p] = limits
	}
	return ratelimit.WithRoutes(mux)
}

// serveMuxPattern writes an Echo pattern the way ServeMux does, or says
// why it cannot: ":name" becomes "{name}", a final "*" "{path...}".
func serveMuxPattern(pattern string) (string, string) {
	path := pattern
	if i := strings.IndexByte(pattern, ' '); i > 0 && !strings.Contains(pattern[:i], "/") {
		path = strings.TrimLeft(pattern[i+1:], " ")
	}
	if !strings.HasPrefix(path, "/") {
		return "", "the path must start with '/' in Echo's syntax"
	}
	if !strings.ContainsAny(pattern, ":*{}") {
		return pattern, ""
	}
	segments := strings.Split(pattern, "/")
	for i, seg := range segments {
		j := strings.IndexAny(seg, ":*")
		switch {
		case strings.ContainsAny(seg, "{}"):
			name := strings.Trim(seg, "{}")
			if rest, ok := strings.CutSuffix(name, "..."); ok {
				return "", fmt.Sprintf("%q is ServeMux syntax; Echo writes the rest of a path %q", seg, "*"+rest)
			}
			return "", fmt.Sprintf("%q is ServeMux syntax; Echo writes a parameter %q", seg, ":"+name)
		case j < 0:
		case j > 0 || strings.ContainsAny(seg[1:], ":*"):
			return "", fmt.Sprintf("%q: ServeMux can only write a parameter that fills a whole segment", seg)
		case seg[0] == ':' && len(seg) > 1:
			segments[i] = "{" + seg[1:] + "}"
		case seg[0] == ':':
			return "", fmt.Sprintf("%q: the parameter needs a name", seg)
		case i != len(segments)-1:
			return "", fmt.Sprintf("%q: a catch-all must end the path", seg)
		case len(seg) > 1:
			segments[i] = "{" + seg[1:] + "...}"
		default:
			segments[i] = "{path...}"
		}
	}
	return strings.Join(segments, "/"), ""
}

// An Option configures [New].
type Option func(*config)

type config struct {
	skip func(echo.Context) bool
}

// WithSkipper exempts the requests for which skip returns true. By
// default no request is exempt.
func WithSkipper(skip func(c echo.Context) bool) Option {
	return func(c *config) { c.skip = skip }
}

// New returns Echo middleware that lets l decide each request. A request
// l denies or cannot decide is answered by l and goes no further; the
// others go on with the rate-limit headers set and c.Request() carrying
// the decision (see [ratelimit.Decisions]), and their status goes to
// l.Finish (for [ratelimit.WithCountOnly]) as the response's header is
// about to be written (for a handler that returned an error, as Echo's
// error handler writes it). The route l sees is
// Echo's c.Path() written the ServeMux way (see [Routes]), set as the
// request's Pattern on a shallow copy of c.Request(). Register it with
// e.Use, which runs after routing, not e.Pre. New panics, when the server
// is built, if l is nil. The middleware is safe for concurrent use.
func New(l *ratelimit.Limiter, opts ...Option) echo.MiddlewareFunc {
	if l == nil {
		panic("echolimit: New: the Limiter is nil")
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if cfg.skip != nil && cfg.skip(c) {
				return next(c)
			}
			r, ok := l.Allow(c.Response(), withPattern(c.Request(), c.Path()))
			if !ok {
				return nil
			}
			c.SetRequest(r) // carries the decision, for ratelimit.Decisions
			res := c.Response()
			res.Before(func() { l.Finish(r, res.Status) }) // as the header is written
			err := next(c)
			if err == nil && !res.Committed {
				l.Finish(r, res.Status) // nothing written: net/http answers for the handler
			}
			return err
		}
	}
}

// withPattern returns a shallow copy of r whose Pattern is Echo's route
// written the ServeMux way, or r when Echo matched no route or the route
// cannot be written so.
func withPattern(r *http.Request, path string) *http.Request {
	if path == "" {
		return r
	}
	p, problem := serveMuxPattern(path)
	if problem != "" {
		return r
	}
	r = r.WithContext(r.Context())
	r.Pattern = p
	return r
}
