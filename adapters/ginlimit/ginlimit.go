// Package ginlimit runs a [ratelimit.Limiter] as Gin middleware.
//
// It only translates Gin's context: the decision, the keys and the headers
// are the Limiter's, exactly as with net/http. It takes the same options,
// with the same names, as the Echo adapter.
//
//	limiter, err := ratelimit.New(store, "api", ratelimit.WithLimits(ratelimit.PerMinute(100)))
//	...
//	router.Use(ginlimit.New(limiter))
package ginlimit

import (
	"github.com/gin-gonic/gin"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/routesyntax"
)

// Routes is [ratelimit.WithRoutes] for a route table in Gin's syntax,
// the patterns as Gin's FullPath names them, with or without a method:
// "GET /users/:id", "/files/*path". A pattern in another router's syntax, such as
// ServeMux's and chi's "{id}", is refused when the Limiter is built,
// naming the pattern and how Gin writes it.
func Routes(table map[string][]ratelimit.Limit) ratelimit.Option {
	return routesyntax.WithRoutes(routesyntax.Gin, table).(ratelimit.Option)
}

// An Option configures [New].
type Option func(*config)

type config struct {
	skip func(*gin.Context) bool
}

// WithSkipper exempts the requests for which skip returns true. By
// default no request is exempt.
func WithSkipper(skip func(c *gin.Context) bool) Option {
	return func(c *config) { c.skip = skip }
}

// New returns Gin middleware that lets l decide each request. A request
// l denies or cannot decide is answered by l and aborted; the others go on
// with the rate-limit headers set and c.Request carrying the decision (see
// [ratelimit.Decisions]), and their status goes to l.Finish (for
// [ratelimit.WithCountOnly]). The route l sees is Gin's FullPath, so
// per-route limits are keyed as in [Routes], for example "GET
// /users/:id". New panics, when the router is built, if l is nil or its
// routes are not in Gin's syntax (built with [ratelimit.WithRoutes], not
// [Routes]). The middleware is safe for concurrent use.
func New(l *ratelimit.Limiter, opts ...Option) gin.HandlerFunc {
	if l == nil {
		panic("ginlimit: New: the Limiter is nil")
	}
	if s, ok := routesyntax.Of(l); ok && s != routesyntax.Gin {
		panic("ginlimit: New: the Limiter's routes are in " + s.String() + "'s syntax, which Gin's FullPath never matches; build them with ginlimit.Routes")
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	return func(c *gin.Context) {
		if cfg.skip != nil && cfg.skip(c) {
			c.Next()
			return
		}
		r := c.Request
		if p := c.FullPath(); p != "" {
			r = ratelimit.RequestWithRoute(r, p)
		}
		r, ok := l.Allow(c.Writer, r)
		if !ok {
			c.Abort()
			return
		}
		c.Request = r // carries the decision, for ratelimit.Decisions
		c.Next()
		l.Finish(r, c.Writer.Status())
	}
}
