package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
)

// TestObserverSeesLeaseRefills: through a Limiter on the Redis store, a
// leased hot key's first request takes a slice of 16 units beyond its
// cost (Result.Leased), the next 16 are decided from it in process
// (Leased 0), and the one after takes a new slice.
func TestObserverSeesLeaseRefills(t *testing.T) {
	mini := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mini.Addr()})
	t.Cleanup(func() { c.Close() })
	s := newRedisStore(t, c, "leased:")
	var mu sync.Mutex
	var leased []int
	everyone := func(*http.Request) (string, error) { return "everyone", nil }
	l, err := ratelimit.New(s, "api", ratelimit.WithKey(everyone),
		ratelimit.WithLimits(ratelimit.Limit{Quota: 10_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true}),
		ratelimit.WithObserver(func(_ *http.Request, e ratelimit.Event) {
			mu.Lock()
			defer mu.Unlock()
			if len(e.Decision.Results()) != 1 {
				t.Errorf("event %q, %v: want one result", e.Outcome, e.Err)
				return
			}
			leased = append(leased, e.Decision.Results()[0].Leased)
		}))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 18 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2." + string(rune('1'+i%9)) + ":1"
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("request %d: status %d", i, w.Code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if leased[0] != 16 || leased[17] < 1 {
		t.Errorf("Leased of the first and the 18th request: %d and %d, want 16 and at least 1 (%v)", leased[0], leased[17], leased)
	}
	for i := 1; i <= 16; i++ {
		if leased[i] != 0 {
			t.Errorf("request %d: Leased %d, want 0, decided from the slice (%v)", i, leased[i], leased)
		}
	}
}
