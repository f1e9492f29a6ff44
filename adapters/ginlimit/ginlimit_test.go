package ginlimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
}

func TestHTTPCases(t *testing.T) { adaptertest.Run(t, framework) }

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

// TestRoutesSyntax: a table in ServeMux's syntax is refused by ginlimit.Routes
// when the Limiter is built, and a Limiter whose table WithRoutes built
// makes New panic; a table in Gin's syntax builds and serves.
func TestRoutesSyntax(t *testing.T) {
	_, err := ratelimit.New(adaptertest.NewStore(t), "test", ginlimit.Routes(map[string][]ratelimit.Limit{"GET /users/{id}": {ratelimit.PerMinute(1)}}))
	if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), `ginlimit.Routes: pattern "GET /users/{id}"`) || !strings.Contains(err.Error(), `Gin writes a parameter ":id"`) {
		t.Errorf("got %v, want an ErrInvalid naming the pattern and how Gin writes it", err)
	}
	if _, err := ratelimit.New(adaptertest.NewStore(t), "test", ginlimit.Routes(map[string][]ratelimit.Limit{"GET /users/:id": {ratelimit.PerMinute(1)}})); err != nil {
		t.Errorf("a table in Gin's syntax: %v", err)
	}
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(1)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "ginlimit.Routes") {
			t.Errorf("New with a ServeMux table: got panic %v, want one pointing to ginlimit.Routes", v)
		}
	}()
	ginlimit.New(l)
}
