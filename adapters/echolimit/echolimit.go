// Package echolimit runs a [ratelimit.Limiter] as Echo middleware.
//
// It only translates Echo's context: the decision, the keys and the
// headers are the Limiter's, and Echo's routes are written the ServeMux
// way ("/users/:id" as "/users/{id}"), so that a route table, its keys and
// what an observer is told are as under net/http (see docs/limits.md).
// Its options are the Gin adapter's.
//
//	limiter, err := ratelimit.New(store, "api", ratelimit.WithLimits(ratelimit.PerMinute(100)))
//	...
//	e.Use(echolimit.New(limiter))
package echolimit

import (
	"errors"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/framework"
)

// Routes is [ratelimit.WithRoutes] for a route table in Echo's syntax,
// as c.Path() names routes, with or without a method: "GET /users/:id",
// "/files/*". A pattern ServeMux cannot write ("/v:version", braces), a
// method not in upper case and two patterns of one shape are refused,
// named, when the Limiter is built. See docs/limits.md.
func Routes(table map[string][]ratelimit.Limit) ratelimit.Option {
	return syntax.Routes(table)
}

// syntax is Echo's: a final "*" is the rest of a path, named "path".
var syntax = framework.Syntax{Router: "Echo", Option: "echolimit.Routes", Rest: "path"}

// An Option configures [New].
type Option func(*config)

type config struct {
	skip func(echo.Context) bool
}

// WithSkipper exempts the requests for which skip returns true; by default none is.
func WithSkipper(skip func(c echo.Context) bool) Option {
	return func(c *config) { c.skip = skip }
}

// New returns Echo middleware that lets l decide each request. A request
// l denies or cannot decide is answered by l and goes no further; the
// others go on with the rate-limit headers set and c.Request() carrying
// the decision (see [ratelimit.Decisions]). l sees c.Path(), written the
// ServeMux way, as the request's Pattern. The status goes to l.Finish (for
// [ratelimit.WithCountOnly]) as the header is about to be written (for a
// handler's error, the one Echo's default error handler writes); l.End
// charges the usage (see [ratelimit.Charge]) once the handlers have
// returned, however. Register it after routing (e.Use, groups, routes),
// or with e.Pre, before: then l matches its own route table (see
// docs/limits.md). New panics if l is nil. The middleware is safe for
// concurrent use.
func New(l *ratelimit.Limiter, opts ...Option) echo.MiddlewareFunc {
	if l == nil {
		panic("echolimit: New: the Limiter is nil")
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	pattern := syntax.Patterns()
	writers := sync.Pool{New: func() any { return new(framework.StatusWriter) }}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if cfg.skip != nil && cfg.skip(c) {
				return next(c)
			}
			r := c.Request()
			saved := r.Pattern
			if p, ok := pattern(c.Path()); ok {
				r.Pattern = p // what the Limiter copies; the request gets its own back below
			}
			decided, ok := l.Allow(c.Response(), r)
			r.Pattern = saved
			if !ok {
				return nil
			}
			c.SetRequest(decided)          // carries the decision, for ratelimit.Decisions
			defer l.End(decided.Context()) // charges its usage, however next returns
			res := c.Response()
			w := writers.Get().(*framework.StatusWriter)
			*w = framework.StatusWriter{ResponseWriter: res.Writer, Finisher: framework.Finisher{Limiter: l, Request: decided}}
			res.Writer = w
			err := next(c)
			if !res.Committed {
				w.Finish(status(c, err)) // nothing written yet, or an error Echo's handler writes next
			}
			res.Writer = w.ResponseWriter
			*w = framework.StatusWriter{}
			writers.Put(w)
			return err
		}
	}
}

// status is the status of c's response once Echo has written it: for a
// handler's error, the one Echo's default error handler writes for it.
func status(c echo.Context, err error) int {
	var he *echo.HTTPError
	switch {
	case err == nil:
		return c.Response().Status
	case errors.As(err, &he):
		return he.Code
	}
	return http.StatusInternalServerError
}
