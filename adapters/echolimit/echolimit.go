// Package echolimit runs a [ratelimit.Limiter] as Echo middleware.
//
// It only translates Echo's context: the decision, the keys and the
// headers are the Limiter's, exactly as with net/http. It takes the same
// options, with the same names, as the Gin adapter.
//
//	limiter, err := ratelimit.New(store, "api", ratelimit.WithLimits(ratelimit.PerMinute(100)))
//	...
//	e.Use(echolimit.New(limiter))
package echolimit

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/routesyntax"
)

// Routes is [ratelimit.WithRoutes] for a route table in Echo's syntax,
// the patterns as Echo's c.Path() names them, with or without a method:
// "GET /users/:id", "/files/*". A pattern in another router's syntax, such as
// ServeMux's and chi's "{id}", is refused when the Limiter is built,
// naming the pattern and how Echo writes it.
func Routes(table map[string][]ratelimit.Limit) ratelimit.Option {
	return routesyntax.WithRoutes(routesyntax.Echo, table).(ratelimit.Option)
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
// l.Finish (for [ratelimit.WithCountOnly]; for a handler that returned an
// error, the status Echo's error handler will write). The route l sees is
// Echo's c.Path(), so per-route limits are keyed as in [Routes], for
// example "GET /users/:id". Register it with e.Use, which runs after
// routing, not e.Pre. New panics, when the server is built, if l is nil
// or its routes are not in Echo's syntax (built with
// [ratelimit.WithRoutes], not [Routes]). The middleware is safe for
// concurrent use.
func New(l *ratelimit.Limiter, opts ...Option) echo.MiddlewareFunc {
	if l == nil {
		panic("echolimit: New: the Limiter is nil")
	}
	if s, ok := routesyntax.Of(l); ok && s != routesyntax.Echo {
		panic("echolimit: New: the Limiter's routes are in " + s.String() + "'s syntax, which Echo's c.Path() never matches; build them with echolimit.Routes")
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
			r := c.Request()
			if p := c.Path(); p != "" {
				r = ratelimit.RequestWithRoute(r, p)
			}
			r, ok := l.Allow(c.Response(), r)
			if !ok {
				return nil
			}
			c.SetRequest(r) // carries the decision, for ratelimit.Decisions
			err := next(c)
			l.Finish(r, status(c, err))
			return err
		}
	}
}

// status is the status of c's response: for a handler's error, the one
// Echo's default error handler writes for it.
func status(c echo.Context, err error) int {
	if err == nil || c.Response().Committed {
		return c.Response().Status
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	return http.StatusInternalServerError
}
