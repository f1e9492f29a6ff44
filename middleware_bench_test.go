package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// BenchmarkMiddleware is the hot path: a request through Limiter.Handler
// from one of 4,096 returning clients, keyed by client IP, 1,000 a minute
// each, decided by Redis, allowed. Compare its allocations with store's
// BenchmarkGoRedisBaseline, go-redis's own share.
func BenchmarkMiddleware(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(b).Addr})
	defer client.Close()
	s, err := store.NewRedis(client, store.RedisOptions{Prefix: "mwbench:"})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimit.New(s, "bench", ratelimit.WithLimits(ratelimit.PerMinute(1000).Using(ratelimit.FixedWindow)))
	if err != nil {
		b.Fatal(err)
	}
	benchClients(b, l)
}

// benchClients runs requests of 4,096 returning clients, keyed by IP,
// through l.
func benchClients(b *testing.B, l *ratelimit.Limiter) {
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reqs := clientRequests()
	w := &discard{h: http.Header{}}
	for _, r := range reqs { // warm up: every client has made a request
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

// clientRequests returns a request of each of 4,096 clients, keyed by
// IP.
func clientRequests() []*http.Request {
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/", nil)
		reqs[i].RemoteAddr = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":1234"
	}
	return reqs
}

// BenchmarkMiddlewareMemory is the request path on the Memory store, where
// the middleware's own cost shows: 4,096 returning clients keyed by IP,
// allowed (a quota they never spend) or denied (a quota of 1, spent during
// the warm-up), without and with an observer (WithObserver).
func BenchmarkMiddlewareMemory(b *testing.B) {
	for _, tc := range []struct {
		name     string
		quota    int
		observed bool
	}{{"allowed", 1_000_000, false}, {"denied", 1, false}, {"allowed,observed", 1_000_000, true}, {"denied,observed", 1, true}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				b.Fatal(err)
			}
			opts := []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(tc.quota).Using(ratelimit.FixedWindow))}
			if tc.observed {
				opts = append(opts, ratelimit.WithObserver(countOutcomes()))
			}
			l, err := ratelimit.New(s, "bench", opts...)
			if err != nil {
				b.Fatal(err)
			}
			benchClients(b, l)
		})
	}
}

// countOutcomes is an observer doing what a metrics observer does at
// least: count each request by outcome, and add up the store's latency.
func countOutcomes() func(ratelimit.Request, ratelimit.Event) {
	var counts [16]atomic.Uint64
	var latency atomic.Int64
	return func(_ ratelimit.Request, e ratelimit.Event) {
		counts[len(e.Outcome)&15].Add(1) // the outcomes' lengths differ
		latency.Add(int64(e.Latency))
	}
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkMiddlewareOverrides is BenchmarkMiddlewareMemory's allowed
// request under overrides (WithOverrides), in three Limiters: none set;
// 10,000 set, of other keys and of prefixes of other keys; and 10,000
// set, every client's key among them, each with a quota of its own. The
// three take turns, 256 requests each, so that a machine whose speed
// drifts slows them alike: a loop is 768 requests, and each Limiter's
// time per request is reported on its own (none-ns/req, others-ns/req,
// own-ns/req), with the last two as a percentage of the first.
func BenchmarkMiddlewareOverrides(b *testing.B) {
	others := make([]override.Override, 0, 10_000)
	for i := range 9_000 {
		others = append(others, override.Override{Policy: "api", StoredKey: "ip:192.0.2." + strconv.Itoa(i), Quota: 5 + i})
	}
	for i := range 1_000 {
		others = append(others, override.Override{Policy: "api", StoredKey: "ip:198.51." + strconv.Itoa(i) + ".*", Quota: 7 + i})
	}
	own := append([]override.Override(nil), others[:10_000-4096]...)
	for i := range 4096 {
		own = append(own, override.Override{Policy: "api", StoredKey: "ip:10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256), Quota: 2_000_000 + i%4})
	}
	names := []string{"none", "others", "own"}
	var handlers []http.Handler
	for _, list := range [][]override.Override{nil, others, own} {
		t, err := override.NewTable(list)
		if err != nil {
			b.Fatal(err)
		}
		s, err := store.NewMemory(store.MemoryOptions{})
		if err != nil {
			b.Fatal(err)
		}
		l, err := ratelimit.New(s, "bench", ratelimit.WithOverrides(override.Fixed(t)),
			ratelimit.WithLimits(ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow).Named("api")))
		if err != nil {
			b.Fatal(err)
		}
		handlers = append(handlers, l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	reqs := clientRequests()
	w := &discard{h: http.Header{}}
	for _, h := range handlers {
		for _, r := range reqs {
			h.ServeHTTP(w, r)
		}
	}
	const turn = 256
	var spent [3]time.Duration
	served := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for c, h := range handlers {
			start := time.Now()
			for j := range turn {
				clear(w.h)
				h.ServeHTTP(w, reqs[(served+j)%len(reqs)])
			}
			spent[c] += time.Since(start)
		}
		served += turn
	}
	for c, name := range names {
		b.ReportMetric(float64(spent[c])/float64(served), name+"-ns/req")
		if c > 0 {
			b.ReportMetric(100*(float64(spent[c])/float64(spent[0])-1), name+"-vs-none-%")
		}
	}
}
