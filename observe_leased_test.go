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
	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// TestObserverSeesLeaseRefills: through a Limiter on the Redis store, a
// leased hot key's first request takes a slice of 16 units beyond its
// cost (Result.Leased), the next 16 are decided from it in process
// (Leased 0), and the one after takes a new slice.
//
// A slice lasts spec.SliceLife, 100ms, from when its request was sent: a
// loaded machine can take longer than that over the 18 requests, and then
// the slice lapses and the next request takes a new one. Each request's
// start and end are measured, and a request is held to what those times
// allow: decided from the slice while its units last, unless the slice
// may have lapsed (the request ended SliceLife or more after the one that
// took it started); taking a new one only when the units are out or the
// slice may have lapsed, and never from a slice that had certainly lapsed
// (the request started SliceLife or more after the taking one ended). On
// an idle machine the 18 requests take a few milliseconds, and that is the
// whole check above.
func TestObserverSeesLeaseRefills(t *testing.T) {
	mini := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mini.Addr()})
	t.Cleanup(func() { c.Close() })
	s := newRedisStore(t, c, "leased:")
	var mu sync.Mutex
	var leased []int
	everyone := func(ratelimit.Request) (string, error) { return "everyone", nil }
	l, err := ratelimit.New(s, "api", ratelimit.WithKey(everyone),
		ratelimit.WithLimits(ratelimit.Limit{Quota: 10_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true}),
		ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
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
	const requests = 18
	var began, ended [requests]time.Time
	for i := range requests {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2." + string(rune('1'+i%9)) + ":1"
		began[i] = time.Now()
		h.ServeHTTP(w, r)
		ended[i] = time.Now()
		if w.Code != 200 {
			t.Fatalf("request %d: status %d", i, w.Code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leased) != requests {
		t.Fatalf("the observer saw %d requests, want %d", len(leased), requests)
	}
	if leased[0] != 16 {
		t.Errorf("Leased of the first request: got %d, want 16 (%v)", leased[0], leased)
	}
	units, taker, lapses := leased[0], 0, 0
	for i := 1; i < requests; i++ {
		alive := ended[i].Sub(began[taker]) < spec.SliceLife   // the slice certainly had time left
		lapsed := began[i].Sub(ended[taker]) >= spec.SliceLife // it certainly had none
		switch {
		case leased[i] > 0 && units > 0 && alive:
			t.Errorf("request %d: Leased %d, want 0: %d units of the slice request %d took %v before were left (%v)", i, leased[i], units, taker, ended[i].Sub(began[taker]), leased)
		case leased[i] == 0 && units == 0:
			t.Errorf("request %d: Leased 0, want a new slice: request %d's slice was spent (%v)", i, taker, leased)
		case leased[i] == 0 && lapsed:
			t.Errorf("request %d: Leased 0, want a new slice: request %d's slice, taken %v before, had lapsed (%v)", i, taker, began[i].Sub(ended[taker]), leased)
		}
		if leased[i] > 0 {
			if units > 0 {
				lapses++
			}
			units, taker = leased[i], i
		} else {
			units--
		}
	}
	if lapses > 0 {
		t.Logf("slices lapsed on a slow machine: %d, in %v for the %d requests (%v)", lapses, ended[requests-1].Sub(began[0]), requests, leased)
	}
}
