package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/store"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// BenchmarkMiddleware is the hot path: a request through Limiter.Handler
// from one of 4,096 returning clients, keyed by client IP, 1,000 a minute
// each, decided by Redis, allowed. Compare its allocations with store's
// BenchmarkGoRedisBaseline, go-redis's own share.
func BenchmarkMiddleware(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(b).Addr})
	defer client.Close()
	s, _ := store.NewRedis(client, store.WithPrefix("mwbench:"))
	l, err := ratelimit.New(s, ratelimit.WithLimits(ratelimit.PerMinute(1000).Using(ratelimit.FixedWindow)))
	if err != nil {
		b.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/", nil)
		reqs[i].RemoteAddr = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":1234"
	}
	w := &discard{h: http.Header{}}
	for _, r := range reqs { // warm up: a returning client's key is known
		h.ServeHTTP(w, r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
