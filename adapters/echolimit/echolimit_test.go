package echolimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

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
}

func TestHTTPCases(t *testing.T) { adaptertest.Run(t, framework) }

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

// TestRoutesSyntax: a table in ServeMux's syntax is refused by echolimit.Routes
// when the Limiter is built, and a Limiter whose table WithRoutes built
// makes New panic; a table in Echo's syntax builds and serves.
func TestRoutesSyntax(t *testing.T) {
	_, err := ratelimit.New(adaptertest.NewStore(t), "test", echolimit.Routes(map[string][]ratelimit.Limit{"GET /users/{id}": {ratelimit.PerMinute(1)}}))
	if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), `echolimit.Routes: pattern "GET /users/{id}"`) || !strings.Contains(err.Error(), `Echo writes a parameter ":id"`) {
		t.Errorf("got %v, want an ErrInvalid naming the pattern and how Echo writes it", err)
	}
	if _, err := ratelimit.New(adaptertest.NewStore(t), "test", echolimit.Routes(map[string][]ratelimit.Limit{"GET /users/:id": {ratelimit.PerMinute(1)}})); err != nil {
		t.Errorf("a table in Echo's syntax: %v", err)
	}
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(1)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "echolimit.Routes") {
			t.Errorf("New with a ServeMux table: got panic %v, want one pointing to echolimit.Routes", v)
		}
	}()
	echolimit.New(l)
}
