package ratelimitprom_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/extra/ratelimitprom"
	"github.com/ratelimit-go/ratelimit/store"
)

// observed returns a handler behind a Limiter of 4 limits a route on a
// Memory store, observed by m when m is not nil, and a request to it.
func observed(tb testing.TB, m *ratelimitprom.Metrics, quota int) (http.Handler, *http.Request) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	opts := []ratelimit.Option{ratelimit.WithRoutes(map[string][]ratelimit.Limit{
		"GET /items/{id}": {ratelimit.Limit{Quota: quota, Window: time.Hour}.Using(ratelimit.FixedWindow).Named("items")},
	})}
	if m != nil {
		opts = append(opts, ratelimit.WithObserver(m.Observe))
	}
	l, err := ratelimit.New(s, "api", opts...)
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	r := httptest.NewRequest("GET", "/items/7", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	return mux, r
}

// TestObserveAllocatesNothing: once a series exists, counting into it
// costs the request no allocation.
func TestObserveAllocatesNothing(t *testing.T) {
	for _, quota := range []int{1 << 30, 1} {
		base, r := observed(t, nil, quota)
		h, _ := observed(t, ratelimitprom.New(), quota)
		count := func(h http.Handler) float64 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return testing.AllocsPerRun(100, func() { h.ServeHTTP(&discard{header: http.Header{}}, r) })
		}
		if with, without := count(h), count(base); with != without {
			t.Errorf("quota %d: %v allocations per request with the metrics, %v without", quota, with, without)
		}
	}
}

// BenchmarkObserved is a request through a Limiter on the Memory store,
// without and with the Prometheus observer, allowed and denied.
func BenchmarkObserved(b *testing.B) {
	for _, tc := range []struct {
		name    string
		quota   int
		metrics bool
	}{{"allowed", 1 << 30, false}, {"allowed,prometheus", 1 << 30, true}, {"denied", 1, false}, {"denied,prometheus", 1, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var m *ratelimitprom.Metrics
			if tc.metrics {
				m = ratelimitprom.New()
			}
			h, r := observed(b, m, tc.quota)
			w := &discard{header: http.Header{}}
			h.ServeHTTP(w, r)
			b.ReportAllocs()
			for b.Loop() {
				clear(w.header)
				h.ServeHTTP(w, r)
			}
		})
	}
}

type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
