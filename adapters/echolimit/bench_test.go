package echolimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/echolimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// BenchmarkNew is the request path through Echo on the Memory store, as
// the root package's BenchmarkMiddlewareMemory is through net/http:
// 4,096 returning clients keyed by IP, allowed, on a route with a
// parameter (whose pattern the adapter writes the ServeMux way).
func BenchmarkNew(b *testing.B) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimit.New(s, "bench", ratelimit.WithLimits(ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow)))
	if err != nil {
		b.Fatal(err)
	}
	e := echo.New()
	e.Use(echolimit.New(l))
	e.GET("/items/:id", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/items/7", nil)
		reqs[i].RemoteAddr = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":1234"
	}
	w := httptest.NewRecorder()
	for _, r := range reqs {
		e.ServeHTTP(w, r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		clear(w.Header())
		e.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
}
