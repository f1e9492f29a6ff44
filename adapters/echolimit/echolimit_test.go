package echolimit_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/echolimit"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

var framework = adaptertest.Framework{
	Pattern: func(r adaptertest.Route) string { return r.Method + " " + r.Path },
	Routes:  echolimit.Routes,
	Serve: func(t *testing.T, ls ...*ratelimit.Limiter) http.Handler {
		e := echo.New()
		for _, l := range ls {
			e.Use(echolimit.New(l))
		}
		addRoutes(e, adaptertest.App)
		return e
	},
	Syntax: adaptertest.ColonSyntax,
	Placements: []adaptertest.Placement{
		{Name: "around the server", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			e := echo.New()
			addRoutes(e, app)
			return l.Handler(e)
		}},
		{Name: "e.Pre", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			e := echo.New()
			e.Pre(echolimit.New(l))
			addRoutes(e, app)
			return e
		}},
		{Name: "e.Use", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			e := echo.New()
			e.Use(echolimit.New(l))
			addRoutes(e, app)
			return e
		}},
		{Name: "each route's middleware", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			e := echo.New()
			addRoutes(e, app, echolimit.New(l))
			return e
		}},
	},
	Name: "echolimit",
	Middleware: func(l *ratelimit.Limiter, skip func(*http.Request) bool) http.Handler {
		var opts []echolimit.Option
		if skip != nil {
			opts = append(opts, echolimit.WithSkipper(func(c echo.Context) bool { return skip(c.Request()) }))
		}
		e := echo.New()
		e.Use(echolimit.New(l, opts...))
		ok := func(c echo.Context) error { return c.NoContent(http.StatusOK) }
		e.GET("/", ok)
		e.GET("/items/:id", ok)
		e.GET("/fail", func(c echo.Context) error {
			ratelimit.Charge(c.Request().Context(), 10)
			return echo.NewHTTPError(http.StatusUnauthorized, "wrong password")
		})
		e.GET("/panic", func(c echo.Context) error {
			ratelimit.Charge(c.Request().Context(), 10)
			panic("the handler failed")
		})
		return recovering(e)
	},
}

// recovering answers 500 to a request whose handler panicked, as Echo's
// Recover does, but around the server: Echo builds the chain of the
// middleware of e.Use for each request, one allocation each, which
// Benchmark would count.
func recovering(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if recover() != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// addRoutes adds app's routes to e, with middleware mw, each answering as
// adaptertest.OK: "*name", which Echo writes "*", as "*".
func addRoutes(e *echo.Echo, app []adaptertest.Route, mw ...echo.MiddlewareFunc) {
	for _, r := range app {
		path := r.Path
		if i := strings.LastIndex(path, "/*"); i >= 0 {
			path = path[:i+2]
		}
		e.Add(r.Method, path, echo.WrapHandler(http.HandlerFunc(adaptertest.OK)), mw...)
	}
}

func TestHTTPCases(t *testing.T) { adaptertest.Run(t, framework) }

// TestRouteCases: a route table, in ServeMux's syntax or Echo's, matches
// by shape, wherever the middleware sits.
func TestRouteCases(t *testing.T) { adaptertest.RunRoutes(t, framework) }

// TestAdapter: the skipper, a nil Limiter, handlers that return an error
// (counted by the status Echo's error handler writes) or panic, and
// Routes.
func TestAdapter(t *testing.T) { adaptertest.RunAdapter(t, framework) }
