package ginlimit_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/ginlimit"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// serve returns a router serving app's routes, each answering as
// adaptertest.OK does, with the handlers mw in front of each.
func serve(router *gin.Engine, group gin.IRoutes, app []adaptertest.Route, mw ...gin.HandlerFunc) *gin.Engine {
	for _, r := range app {
		group.Handle(r.Method, r.Path, append(mw, gin.WrapF(adaptertest.OK))...)
	}
	return router
}

var framework = adaptertest.Framework{
	Pattern: func(r adaptertest.Route) string { return r.Method + " " + r.Path },
	Routes:  ginlimit.Routes,
	Serve: func(t *testing.T, ls ...*ratelimit.Limiter) http.Handler {
		router := gin.New()
		for _, l := range ls {
			router.Use(ginlimit.New(l))
		}
		return serve(router, router, adaptertest.App)
	},
	Syntax: adaptertest.ColonSyntax,
	Placements: []adaptertest.Placement{
		{Name: "around the engine", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			return l.Handler(serve(router, router, app))
		}},
		{Name: "router.Use", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			router.Use(ginlimit.New(l))
			return serve(router, router, app)
		}},
		{Name: "a group's middleware", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			return serve(router, router.Group("/", ginlimit.New(l)), app)
		}},
		{Name: "each route's middleware", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			return serve(router, router, app, ginlimit.New(l))
		}},
	},
	Name: "ginlimit",
	Middleware: func(l *ratelimit.Limiter, skip func(*http.Request) bool) http.Handler {
		var opts []ginlimit.Option
		if skip != nil {
			opts = append(opts, ginlimit.WithSkipper(func(c *gin.Context) bool { return skip(c.Request) }))
		}
		router := gin.New()
		router.Use(gin.Recovery(), ginlimit.New(l, opts...))
		ok := func(c *gin.Context) { c.Status(http.StatusOK) }
		router.GET("/", ok)
		router.GET("/items/:id", ok)
		router.GET("/fail", func(c *gin.Context) {
			ratelimit.Charge(c.Request.Context(), 10)
			c.AbortWithStatus(http.StatusUnauthorized)
		})
		router.GET("/panic", func(c *gin.Context) {
			ratelimit.Charge(c.Request.Context(), 10)
			panic("the handler failed")
		})
		return router
	},
}

func TestHTTPCases(t *testing.T) { adaptertest.Run(t, framework) }

// TestRouteCases: a route table, in ServeMux's syntax or Gin's, matches
// by shape, wherever the middleware sits.
func TestRouteCases(t *testing.T) { adaptertest.RunRoutes(t, framework) }

// TestAdapter: the skipper, a nil Limiter, handlers that abort or panic,
// and Routes.
func TestAdapter(t *testing.T) { adaptertest.RunAdapter(t, framework) }
