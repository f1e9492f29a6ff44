package ginlimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
	"github.com/ratelimit-go/ratelimit/adapters/ginlimit"
)

func init() { gin.SetMode(gin.ReleaseMode) }

var framework = adaptertest.Framework{
	Pattern: func(r adaptertest.Route) string { return r.Method + " " + r.Path },
	Routes:  ginlimit.Routes,
	Serve: func(t *testing.T, ls ...*ratelimit.Limiter) http.Handler {
		router := gin.New()
		for _, l := range ls {
			router.Use(ginlimit.New(l))
		}
		for _, r := range adaptertest.App {
			router.Handle(r.Method, r.Path, gin.WrapF(adaptertest.OK))
		}
		return router
	},
	Syntax: adaptertest.ColonSyntax,
	Placements: []adaptertest.Placement{
		{Name: "around the engine", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			for _, r := range app {
				router.Handle(r.Method, r.Path, gin.WrapF(adaptertest.OK))
			}
			return l.Handler(router)
		}},
		{Name: "router.Use", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			router.Use(ginlimit.New(l))
			for _, r := range app {
				router.Handle(r.Method, r.Path, gin.WrapF(adaptertest.OK))
			}
			return router
		}},
		{Name: "a group's middleware", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			group := router.Group("/", ginlimit.New(l))
			for _, r := range app {
				group.Handle(r.Method, r.Path, gin.WrapF(adaptertest.OK))
			}
			return router
		}},
		{Name: "each route's middleware", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			router := gin.New()
			limit := ginlimit.New(l)
			for _, r := range app {
				router.Handle(r.Method, r.Path, limit, gin.WrapF(adaptertest.OK))
			}
			return router
		}},
	},
}

func TestHTTPCases(t *testing.T) { adaptertest.Run(t, framework) }

// TestRouteCases: a route table, in ServeMux's syntax or Gin's, matches
// by shape, wherever the middleware sits.
func TestRouteCases(t *testing.T) { adaptertest.RunRoutes(t, framework) }

func TestSkipper(t *testing.T) {
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(1)))
	if err != nil {
		t.Fatal(err)
	}
	router := gin.New()
	router.Use(ginlimit.New(l, ginlimit.WithSkipper(func(c *gin.Context) bool { return c.GetHeader("X-Internal") == "1" })))
	router.GET("/", gin.WrapF(adaptertest.OK))
	for i, tt := range []struct {
		internal bool
		want     int
	}{{false, 200}, {false, 429}, {true, 200}, {true, 200}} {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.internal {
			r.Header.Set("X-Internal", "1")
		}
		w := httptest.NewRecorder()
		router.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("request %d: got %d, want %d", i, w.Code, tt.want)
		}
	}
}

func TestNilLimiterPanicsAtBuild(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(nil) did not panic")
		}
	}()
	ginlimit.New(nil)
}

// TestRoutesSyntax: ginlimit.Routes writes Gin's patterns the ServeMux way
// and refuses what ServeMux cannot write, naming the pattern; a table in
// ServeMux's syntax given to ratelimit.WithRoutes limits the same routes
// under Gin, under the same keys.
func TestRoutesSyntax(t *testing.T) {
	for pattern, want := range map[string]string{
		"GET /users/{id}": `"{id}" is ServeMux syntax; Gin writes a parameter ":id"`,
		"/v:version/x":    "fills a whole segment",
		"/a/*rest/b":      "a catch-all must end the path",
		"post /login":     `the method "post" must be upper case, as requests carry it: "POST /login"`,
		"get /users/:id":  `the method "get" must be upper case, as requests carry it: "GET /users/:id"`,
	} {
		_, err := ratelimit.New(adaptertest.NewStore(t), "test", ginlimit.Routes(map[string][]ratelimit.Limit{pattern: {ratelimit.PerMinute(1)}}))
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), `ginlimit.Routes: pattern "`+pattern+`"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an ErrInvalid naming the pattern and %q", pattern, err, want)
		}
	}
	_, err := ratelimit.New(adaptertest.NewStore(t), "test", ginlimit.Routes(map[string][]ratelimit.Limit{"GET /users/:id": {ratelimit.PerMinute(1)}, "GET /users/:name": {ratelimit.PerMinute(2)}}))
	if want := `ginlimit.Routes: pattern "GET /users/:name": "GET /users/:id" is the same route, GET /users/{}: the names of parameters do not matter`; !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("two patterns of one shape: got %v, want an ErrInvalid saying %q", err, want)
	}
	_, err = ratelimit.New(adaptertest.NewStore(t), "test", ginlimit.Routes(map[string][]ratelimit.Limit{"/files/*path": {ratelimit.PerMinute(1)}, "/files/*other": {ratelimit.PerMinute(2)}}))
	if want := `pattern "/files/*path": "/files/*other" is the same route, /files/{...}`; !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("two rests of one shape: got %v, want an ErrInvalid saying %q", err, want)
	}
	_, err = ratelimit.New(adaptertest.NewStore(t), "test", ginlimit.Routes(map[string][]ratelimit.Limit{"/users/:id": {ratelimit.PerMinute(1)}, "GET /users/:id": {ratelimit.PerMinute(2)}, "/users/{id}x": nil}))
	if !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("a table with braces: got %v, want ErrInvalid", err)
	}
	for _, routes := range []ratelimit.Option{
		ginlimit.Routes(map[string][]ratelimit.Limit{"GET /users/:id": {ratelimit.PerMinute(1).Named("users")}, "/files/*path": {ratelimit.PerMinute(1).Named("files")}}),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{"GET /users/{id}": {ratelimit.PerMinute(1).Named("users")}, "/files/{path...}": {ratelimit.PerMinute(1).Named("files")}}),
	} {
		var routes2 []string
		l, err := ratelimit.New(adaptertest.NewStore(t), "test", routes, ratelimit.WithObserver(func(_ *http.Request, e ratelimit.Event) { routes2 = append(routes2, e.Route) }))
		if err != nil {
			t.Fatal(err)
		}
		h := serveRoutes(l)
		for _, tt := range []struct {
			path string
			want []int
		}{{"/users/1", []int{200, 429}}, {"/files/a/b", []int{200, 429}}} {
			for i, want := range tt.want {
				w, r := httptest.NewRecorder(), httptest.NewRequest("GET", tt.path, nil)
				h.ServeHTTP(w, r)
				if w.Code != want {
					t.Errorf("%s, request %d: got %d, want %d", tt.path, i, w.Code, want)
				}
				if r.Pattern != "" {
					t.Errorf("%s: the server's request was left with Pattern %q", tt.path, r.Pattern)
				}
			}
		}
		if want := []string{"GET /users/{id}", "GET /users/{id}", "/files/{path...}", "/files/{path...}"}; !slices.Equal(routes2, want) {
			t.Errorf("observed routes %q, want %q: the ServeMux way", routes2, want)
		}
	}
}

// serveRoutes serves GET /users/:id and GET /files/*path through l.
func serveRoutes(l *ratelimit.Limiter) http.Handler {
	router := gin.New()
	router.Use(ginlimit.New(l))
	router.GET("/users/:id", gin.WrapF(adaptertest.OK))
	router.GET("/files/*path", gin.WrapF(adaptertest.OK))
	return router
}

// TestSlotGivenBackHoweverTheHandlersEnd: a request's slot of a limit of
// one request in flight is given back, and its usage charged, when a
// later handler aborts, and when one panics (Gin's Recovery answers it).
func TestSlotGivenBackHoweverTheHandlersEnd(t *testing.T) {
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithLimits(
		ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 1, Name: "slot"},
		ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100, Window: time.Minute, Usage: true, Name: "tokens"},
	))
	if err != nil {
		t.Fatal(err)
	}
	router := gin.New()
	router.Use(gin.Recovery(), ginlimit.New(l))
	router.GET("/abort", func(c *gin.Context) {
		ratelimit.Charge(c.Request.Context(), 10)
		c.AbortWithStatus(http.StatusForbidden)
	})
	router.GET("/panic", func(c *gin.Context) {
		ratelimit.Charge(c.Request.Context(), 10)
		panic("the handler failed")
	})
	for i, path := range []string{"/abort", "/panic", "/abort", "/panic"} {
		w := httptest.NewRecorder()
		router.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code == http.StatusTooManyRequests {
			t.Fatalf("request %d (%s): 429: an earlier request kept its slot", i, path)
		}
	}
	d, err := l.Peek(httptest.NewRequest("GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Results()[1].Remaining; got != 60 {
		t.Errorf("tokens left: %d, want 60: each of the 4 requests charged its 10", got)
	}
}
