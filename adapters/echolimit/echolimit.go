// Package echolimit runs a [ratelimit.Limiter] as Echo middleware.
//
// It only translates Echo's context: the decision, the keys and the
// headers are the Limiter's, exactly as with net/http.
//
//	limiter, err := ratelimit.New(store, ratelimit.WithLimits(ratelimit.PerMinute(100)))
//	...
//	e.Use(echolimit.New(limiter))
package echolimit

import (
	"errors"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/ratelimit-go/ratelimit"
)

// Config configures the middleware.
type Config struct {
	// Skipper exempts the requests for which it returns true. The default
	// skips none.
	Skipper middleware.Skipper

	// Limiter decides the requests. It is required.
	Limiter *ratelimit.Limiter
}

// DefaultConfig skips no request; set its Limiter.
var DefaultConfig = Config{Skipper: middleware.DefaultSkipper}

// New returns middleware for l with the default configuration. It panics
// if l is nil, when the server is built.
func New(l *ratelimit.Limiter) echo.MiddlewareFunc {
	cfg := DefaultConfig
	cfg.Limiter = l
	mw, err := cfg.ToMiddleware()
	if err != nil {
		panic(err)
	}
	return mw
}

// ToMiddleware returns Echo middleware that lets the Limiter decide each
// request. A request it denies or cannot decide is answered by the Limiter
// and goes no further; the others go on with the rate-limit headers set.
// The route the Limiter sees is Echo's c.Path(), so per-route limits are
// keyed as in [ratelimit.WithRoutes], for example "GET /users/:id".
// Register it with e.Use, which runs after routing, not e.Pre.
func (c Config) ToMiddleware() (echo.MiddlewareFunc, error) {
	if c.Limiter == nil {
		return nil, errors.New("echolimit: Config.Limiter is nil")
	}
	skip := c.Skipper
	if skip == nil {
		skip = middleware.DefaultSkipper
	}
	l := c.Limiter
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if skip(c) {
				return next(c)
			}
			r := c.Request()
			if p := c.Path(); p != "" {
				r = ratelimit.RequestWithRoute(r, p)
			}
			if !l.Allow(c.Response(), r) {
				return nil
			}
			return next(c)
		}
	}, nil
}
