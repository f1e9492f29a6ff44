// Package echolimit runs a [ratelimit.Limiter] as Echo middleware.
//
// It only translates Echo's context: the decision, the keys and the
// headers are the Limiter's, exactly as with net/http. Echo's routes are
// written the way Go's ServeMux writes them ("/users/:id" as
// "/users/{id}", "/files/*" as "/files/{path...}", and "/", which Echo
// matches alone, as "/{$}"), so a Limiter's route table, its keys and
// what an observer is told are the same under Echo as under net/http. It
// takes the same options, with the same names, as the Gin adapter.
//
//	limiter, err := ratelimit.New(store, "api", ratelimit.WithLimits(ratelimit.PerMinute(100)))
//	...
//	e.Use(echolimit.New(limiter))
package echolimit

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"

	"github.com/ratelimit-go/ratelimit"
)

// Routes is [ratelimit.WithRoutes] for a route table in Echo's syntax,
// the patterns as Echo's c.Path() names them, with or without a method:
// "GET /users/:id", "/files/*". It writes them the ServeMux way and
// passes them to WithRoutes, which also takes a table written that way.
// A pattern that ServeMux cannot write (a parameter inside a segment, such
// as "/v:version") or that holds braces is refused when the Limiter is
// built, naming the pattern; so are a method not in upper case ("post
// /login") and two patterns of one shape ("/users/:id" and
// "/users/:name"). As with WithRoutes, a request gets the entry of its
// route's shape, whatever the parameters are called and wherever the
// middleware sits.
func Routes(table map[string][]ratelimit.Limit) ratelimit.Option {
	mux := make(map[string][]ratelimit.Limit, len(table))
	shapes := make(map[string]string, len(table)) // a shape's pattern
	// In order, so that of two patterns of one shape the error names
	// the same one first every time.
	for _, pattern := range slices.Sorted(maps.Keys(table)) {
		p, shape, problem := serveMuxPattern(pattern)
		if other, dup := shapes[shape]; problem == "" && dup {
			problem = fmt.Sprintf("%q is the same route, %s: the names of parameters do not matter, so the table cannot tell them apart", other, shape)
		}
		if problem != "" {
			return func(*ratelimit.Limiter) error {
				return fmt.Errorf("%w: echolimit.Routes: pattern %q: %s", ratelimit.ErrInvalid, pattern, problem)
			}
		}
		shapes[shape] = pattern
		mux[p] = table[pattern]
	}
	return ratelimit.WithRoutes(mux)
}

// serveMuxPattern writes an Echo pattern the way ServeMux does, with its
// shape (the method, one space, and the path with each parameter's name
// left out, "{}" and "{...}"), or says why it cannot: ":name" becomes
// "{name}", a final "*" "{path...}", and a final "/", which Echo matches
// alone, "/{$}".
func serveMuxPattern(pattern string) (muxPattern, shape, problem string) {
	method, path := "", pattern
	if i := strings.IndexByte(pattern, ' '); i > 0 && !strings.Contains(pattern[:i], "/") {
		method, path = pattern[:i], strings.TrimLeft(pattern[i+1:], " ")
	}
	if problem := checkMethod(method, path); problem != "" {
		return "", "", problem
	}
	if !strings.HasPrefix(path, "/") {
		return "", "", "the path must start with '/' in Echo's syntax"
	}
	prefix, shapePrefix := pattern[:len(pattern)-len(path)], ""
	if method != "" {
		shapePrefix = method + " "
	}
	if !strings.ContainsAny(path, ":*{}") && !strings.HasSuffix(path, "/") {
		return pattern, shapePrefix + path, ""
	}
	segments := strings.Split(path, "/")
	shapes := make([]string, len(segments))
	for i, seg := range segments {
		shapes[i] = seg
		j := strings.IndexAny(seg, ":*")
		switch {
		case strings.ContainsAny(seg, "{}"):
			name := strings.Trim(seg, "{}")
			if rest, ok := strings.CutSuffix(name, "..."); ok {
				return "", "", fmt.Sprintf("%q is ServeMux syntax; Echo writes the rest of a path %q", seg, "*"+rest)
			}
			return "", "", fmt.Sprintf("%q is ServeMux syntax; Echo writes a parameter %q", seg, ":"+name)
		case seg == "" && i > 0 && i == len(segments)-1:
			segments[i], shapes[i] = "{$}", "{$}" // Echo matches "/users/" alone, as ServeMux "/users/{$}"
		case j < 0:
		case j > 0 || strings.ContainsAny(seg[1:], ":*"):
			return "", "", fmt.Sprintf("%q: ServeMux can only write a parameter that fills a whole segment", seg)
		case seg[0] == ':' && len(seg) > 1:
			segments[i], shapes[i] = "{"+seg[1:]+"}", "{}"
		case seg[0] == ':':
			return "", "", fmt.Sprintf("%q: the parameter needs a name", seg)
		case i != len(segments)-1:
			return "", "", fmt.Sprintf("%q: a catch-all must end the path", seg)
		case len(seg) > 1:
			segments[i], shapes[i] = "{"+seg[1:]+"...}", "{...}"
		default:
			segments[i], shapes[i] = "{path...}", "{...}"
		}
	}
	return prefix + strings.Join(segments, "/"), shapePrefix + strings.Join(shapes, "/"), ""
}

// checkMethod says what is wrong with a pattern's method, or returns "":
// it must be an HTTP method token, in upper case, as requests carry it;
// "post" would never match.
func checkMethod(method, path string) string {
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
// about to be written, through a writer that wraps the response's while
// the handlers run (for a handler that returned an error, the status
// Echo's default error handler writes for it). Once the handlers have
// returned, however they return (an error or a panic too), l.End charges
// the request's usage (see [ratelimit.Charge]). The route l sees is Echo's
// c.Path() written the ServeMux way (see [Routes]), as the Pattern of the
// request it decides: c.Request() itself while l.Allow runs, given back
// unchanged after. Register it with e.Use or on routes or groups, after
// routing, or with e.Pre, before: then no route is known yet, and l
// matches the request against its route table (see
// [ratelimit.WithRoutes]), as around a whole ServeMux. New panics, when
// the server is built, if l is nil. The middleware is safe for
// concurrent use.
func New(l *ratelimit.Limiter, opts ...Option) echo.MiddlewareFunc {
	if l == nil {
		panic("echolimit: New: the Limiter is nil")
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	var routes patterns
	writers := sync.Pool{New: func() any { return new(finishWriter) }}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if cfg.skip != nil && cfg.skip(c) {
				return next(c)
			}
			r := c.Request()
			saved := r.Pattern
			if p, ok := routes.of(c.Path()); ok {
				r.Pattern = p // what the Limiter copies; the request gets its own back below
			}
			decided, ok := l.Allow(c.Response(), r)
			r.Pattern = saved
			if !ok {
				return nil
			}
			c.SetRequest(decided) // carries the decision, for ratelimit.Decisions
			defer l.End(decided)  // charges its usage, however next returns
			res := c.Response()
			w := writers.Get().(*finishWriter)
			*w = finishWriter{ResponseWriter: res.Writer, l: l, r: decided}
			res.Writer = w
			err := next(c)
			if !res.Committed {
				w.finish(status(c, err)) // nothing written yet, or an error Echo's handler writes next
			}
			res.Writer = w.ResponseWriter
			*w = finishWriter{}
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

// patterns holds the routes of a router written the ServeMux way, each
// worked out once: a router has few, and they come back on every
// request. It keeps at most maxPatterns, and works out the others each
// time. The zero value is ready to use.
type patterns struct {
	m sync.Map // route to its ServeMux pattern, "" when it has none
	n atomic.Int64
}

// maxPatterns bounds the routes a patterns keeps.
const maxPatterns = 4096

// of returns route written the ServeMux way, and false when Echo matched
// no route or ServeMux cannot write it.
func (p *patterns) of(route string) (string, bool) {
	if route == "" {
		return "", false
	}
	if v, ok := p.m.Load(route); ok {
		s := v.(string)
		return s, s != ""
	}
	s, _, problem := serveMuxPattern(route)
	if problem != "" {
		s = ""
	}
	if p.n.Add(1) <= maxPatterns {
		p.m.Store(route, s)
	}
	return s, s != ""
}

// finishWriter reports the response's status to the Limiter (see
// ratelimit.Limiter.Finish), once, as its header is about to be written.
type finishWriter struct {
	http.ResponseWriter
	l    *ratelimit.Limiter
	r    *http.Request
	done bool
}

func (w *finishWriter) finish(status int) {
	if !w.done {
		w.done = true
		w.l.Finish(w.r, status)
	}
}

func (w *finishWriter) WriteHeader(code int) {
	if code >= 200 { // not an informational answer
		w.finish(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *finishWriter) Write(b []byte) (int, error) {
	w.finish(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush flushes the server's writer, when it can.
func (w *finishWriter) Flush() {
	w.finish(http.StatusOK)
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the server's writer, for http.ResponseController.
func (w *finishWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
