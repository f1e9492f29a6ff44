package echolimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
	"github.com/ratelimit-go/ratelimit/adapters/echolimit"
)

var framework = adaptertest.Framework{
	Pattern: func(r adaptertest.Route) string { return r.Method + " " + r.Path },
	Routes:  echolimit.Routes,
	Serve: func(t *testing.T, ls ...*ratelimit.Limiter) http.Handler {
		e := echo.New()
		for _, l := range ls {
			e.Use(echolimit.New(l))
		}
		for _, r := range adaptertest.App {
			e.Add(r.Method, r.Path, echo.WrapHandler(http.HandlerFunc(adaptertest.OK)))
		}
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

func TestSkipper(t *testing.T) {
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(1)))
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(echolimit.New(l, echolimit.WithSkipper(func(c echo.Context) bool { return c.Request().Header.Get("X-Internal") == "1" })))
	e.GET("/", echo.WrapHandler(http.HandlerFunc(adaptertest.OK)))
	for i, tt := range []struct {
		internal bool
		want     int
	}{{false, 200}, {false, 429}, {true, 200}, {true, 200}} {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.internal {
			r.Header.Set("X-Internal", "1")
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
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
	echolimit.New(nil)
}

// TestCountOnlySeesHandlerErrors: a handler that returns an error counts
// with the status Echo's error handler writes for it.
func TestCountOnlySeesHandlerErrors(t *testing.T) {
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithCountOnly(nil),
		ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow)))
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(echolimit.New(l))
	e.POST("/login", func(c echo.Context) error {
		if c.FormValue("password") != "letmein" {
			return echo.NewHTTPError(http.StatusUnauthorized, "wrong password")
		}
		return c.String(http.StatusOK, "welcome")
	})
	for i, tt := range []struct {
		password string
		want     int
	}{{"letmein", 200}, {"guess", 401}, {"letmein", 200}, {"guess", 401}, {"guess", 429}, {"letmein", 429}} {
		r := httptest.NewRequest("POST", "/login", strings.NewReader("password="+tt.password))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("attempt %d (%s): got %d, want %d", i, tt.password, w.Code, tt.want)
		}
	}
}

// TestRoutesSyntax: echolimit.Routes writes Echo's patterns the ServeMux way
// and refuses what ServeMux cannot write, naming the pattern; a table in
// ServeMux's syntax given to ratelimit.WithRoutes limits the same routes
// under Echo, under the same keys.
func TestRoutesSyntax(t *testing.T) {
	for pattern, want := range map[string]string{
		"GET /users/{id}": `"{id}" is ServeMux syntax; Echo writes a parameter ":id"`,
		"/v:version/x":    "fills a whole segment",
		"/a/*rest/b":      "a catch-all must end the path",
		"post /login":     `the method "post" must be upper case, as requests carry it: "POST /login"`,
		"get /users/:id":  `the method "get" must be upper case, as requests carry it: "GET /users/:id"`,
	} {
		_, err := ratelimit.New(adaptertest.NewStore(t), "test", echolimit.Routes(map[string][]ratelimit.Limit{pattern: {ratelimit.PerMinute(1)}}))
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), `echolimit.Routes: pattern "`+pattern+`"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an ErrInvalid naming the pattern and %q", pattern, err, want)
		}
	}
	_, err := ratelimit.New(adaptertest.NewStore(t), "test", echolimit.Routes(map[string][]ratelimit.Limit{"GET /users/:id": {ratelimit.PerMinute(1)}, "GET /users/:name": {ratelimit.PerMinute(2)}}))
	if want := `echolimit.Routes: pattern "GET /users/:name": "GET /users/:id" is the same route, GET /users/{}: the names of parameters do not matter`; !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("two patterns of one shape: got %v, want an ErrInvalid saying %q", err, want)
	}
	_, err = ratelimit.New(adaptertest.NewStore(t), "test", echolimit.Routes(map[string][]ratelimit.Limit{"/files/*": {ratelimit.PerMinute(1)}, "/files/*other": {ratelimit.PerMinute(2)}}))
	if want := `pattern "/files/*other": "/files/*" is the same route, /files/{...}`; !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("two rests of one shape: got %v, want an ErrInvalid saying %q", err, want)
	}
	_, err = ratelimit.New(adaptertest.NewStore(t), "test", echolimit.Routes(map[string][]ratelimit.Limit{"/users/:id": {ratelimit.PerMinute(1)}, "GET /users/:id": {ratelimit.PerMinute(2)}, "/users/{id}x": nil}))
	if !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("a table with braces: got %v, want ErrInvalid", err)
	}
	for _, routes := range []ratelimit.Option{
		echolimit.Routes(map[string][]ratelimit.Limit{"GET /users/:id": {ratelimit.PerMinute(1).Named("users")}, "/files/*": {ratelimit.PerMinute(1).Named("files")}}),
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

// serveRoutes serves GET /users/:id and GET /files/* through l.
func serveRoutes(l *ratelimit.Limiter) http.Handler {
	e := echo.New()
	e.Use(echolimit.New(l))
	e.GET("/users/:id", echo.WrapHandler(http.HandlerFunc(adaptertest.OK)))
	e.GET("/files/*", echo.WrapHandler(http.HandlerFunc(adaptertest.OK)))
	return e
}

// TestSlotGivenBackHoweverTheHandlersEnd: a request's slot of a limit of
// one request in flight is given back, and its usage charged, when the
// handler returns an error, and when it panics (Echo's Recover answers
// it).
func TestSlotGivenBackHoweverTheHandlersEnd(t *testing.T) {
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithLimits(
		ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 1, Name: "slot"},
		ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100, Window: time.Minute, Usage: true, Name: "tokens"},
	))
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(middleware.Recover(), echolimit.New(l))
	e.GET("/error", func(c echo.Context) error {
		ratelimit.Charge(c.Request().Context(), 10)
		return echo.NewHTTPError(http.StatusForbidden)
	})
	e.GET("/panic", func(c echo.Context) error {
		ratelimit.Charge(c.Request().Context(), 10)
		panic("the handler failed")
	})
	for i, path := range []string{"/error", "/panic", "/error", "/panic"} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
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
