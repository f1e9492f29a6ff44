package ginlimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/ginlimit"
	"github.com/ratelimit-go/ratelimit/internal/httpcases"
)

func init() { gin.SetMode(gin.ReleaseMode) }

var framework = httpcases.Framework{
	Pattern: func(r httpcases.Route) string { return r.Method + " " + r.Path },
	Serve: func(t *testing.T, l *ratelimit.Limiter) http.Handler {
		router := gin.New()
		router.Use(ginlimit.New(l))
		for _, r := range httpcases.App {
			router.Handle(r.Method, r.Path, gin.WrapF(httpcases.OK))
		}
		return router
	},
}

func TestHTTPCases(t *testing.T) { httpcases.Run(t, framework) }

func TestSkipper(t *testing.T) {
	l, err := ratelimit.New(httpcases.NewStore(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(1)))
	if err != nil {
		t.Fatal(err)
	}
	router := gin.New()
	router.Use(ginlimit.New(l, ginlimit.WithSkipper(func(c *gin.Context) bool { return c.GetHeader("X-Internal") == "1" })))
	router.GET("/", gin.WrapF(httpcases.OK))
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
