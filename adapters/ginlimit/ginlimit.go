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
)

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
// with the rate-limit headers set, and their status goes to l.Finish (for
// [ratelimit.WithCountOnly]). The route l sees is Gin's FullPath, so
// per-route limits are keyed as in [ratelimit.WithRoutes], for example
// "GET /users/:id". New panics if l is nil, when the router is built. The
// middleware is safe for concurrent use.
func New(l *ratelimit.Limiter, opts ...Option) gin.HandlerFunc {
	if l == nil {
		panic("ginlimit: New: the Limiter is nil")
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
		if !l.Allow(c.Writer, r) {
			c.Abort()
			return
		}
		c.Next()
		l.Finish(r, c.Writer.Status())
	}
}
