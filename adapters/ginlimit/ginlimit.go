// Package ginlimit runs a [ratelimit.Limiter] as Gin middleware.
//
// It only translates Gin's context: the decision, the keys and the headers
// are the Limiter's, and Gin's routes are written the ServeMux way
// ("/users/:id" as "/users/{id}"), so that a route table, its keys and
// what an observer is told are as under net/http (see docs/limits.md).
// Its options are the Echo adapter's.
//
//	limiter, err := ratelimit.New(store, "api", ratelimit.WithLimits(ratelimit.PerMinute(100)))
//	...
//	router.Use(ginlimit.New(limiter))
package ginlimit

import (
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/framework"
)

// Routes is [ratelimit.WithRoutes] for a route table in Gin's syntax, as
// FullPath names routes, with or without a method: "GET /users/:id",
// "/files/*path". A pattern ServeMux cannot write ("/v:version", braces),
// a method not in upper case and two patterns of one shape are refused,
// named, when the Limiter is built. See docs/limits.md.
func Routes(table map[string][]ratelimit.Limit) ratelimit.Option {
	return syntax.Routes(table)
}

// syntax is Gin's: a catch-all has a name.
var syntax = framework.Syntax{Router: "Gin", Option: "ginlimit.Routes"}

// An Option configures [New].
type Option func(*config)

type config struct {
	skip func(*gin.Context) bool
}

// WithSkipper exempts the requests for which skip returns true; by default none is.
func WithSkipper(skip func(c *gin.Context) bool) Option {
	return func(c *config) { c.skip = skip }
}

// New returns Gin middleware that lets l decide each request. A request
// l denies or cannot decide is answered by l and aborted; the others go on
// with the rate-limit headers set and c.Request carrying the decision (see
// [ratelimit.Decisions]). l sees FullPath, written the ServeMux way, as
// the request's Pattern. The status goes to l.Finish (for
// [ratelimit.WithCountOnly]) as the header is about to be written; l.End
// charges the usage (see [ratelimit.Charge]) once the handlers have
// returned, however (an abort or a panic too). New panics if l is nil. The
// middleware is safe for concurrent use.
func New(l *ratelimit.Limiter, opts ...Option) gin.HandlerFunc {
	if l == nil {
		panic("ginlimit: New: the Limiter is nil")
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	pattern := syntax.Patterns()
	writers := sync.Pool{New: func() any { return new(statusWriter) }}
	return func(c *gin.Context) {
		if cfg.skip != nil && cfg.skip(c) {
			c.Next()
			return
		}
		r := c.Request
		saved := r.Pattern
		if p, ok := pattern(c.FullPath()); ok {
			r.Pattern = p // what the Limiter copies; c.Request gets its own back below
		}
		decided, ok := l.Allow(c.Writer, r)
		r.Pattern = saved
		if !ok {
			c.Abort()
			return
		}
		c.Request = decided            // carries the decision, for ratelimit.Decisions
		defer l.End(decided.Context()) // charges its usage, however the handlers return
		w := writers.Get().(*statusWriter)
		*w = statusWriter{ResponseWriter: c.Writer, Finisher: framework.Finisher{Limiter: l, Request: decided}}
		c.Writer = w
		c.Next()
		w.Finish(w.Status()) // Gin writes the header of a handler that wrote none after this
		c.Writer = w.ResponseWriter
		*w = statusWriter{}
		writers.Put(w)
	}
}

// statusWriter tells the Limiter the status as the header is about to
// be written: Gin's WriteHeader only sets the status it will write.
type statusWriter struct {
	gin.ResponseWriter
	framework.Finisher
}

func (w *statusWriter) WriteHeaderNow() {
	w.Finish(w.Status())
	w.ResponseWriter.WriteHeaderNow()
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.Finish(w.Status())
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) WriteString(s string) (int, error) {
	w.Finish(w.Status())
	return w.ResponseWriter.WriteString(s)
}

func (w *statusWriter) Flush() {
	w.Finish(w.Status())
	w.ResponseWriter.Flush()
}
