package ratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratelimit-go/ratelimit"
)

// unauthorized answers 401, as a failed login does.
var unauthorized = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })

// TestCountOnlyRaceBound: with WithCountOnly, requests in flight together
// when the quota runs out are all let through, and no more: on a real
// Redis, W workers sending failures admit at most quota + W of them, the
// counter never passes the quota, and once it is spent every request is
// denied.
func TestCountOnlyRaceBound(t *testing.T) {
	t.Parallel()
	const quota, workers, perWorker = 5, 8, 20
	c, prefix := sharedRedis(t)
	l := newLimiter(t, newRedisStore(t, c, prefix), "race", ratelimit.WithCountOnly(nil),
		ratelimit.WithLimits(ratelimit.PerMinute(quota).Using(ratelimit.FixedWindow)))
	// A request is in flight from the Limiter's peek to its count; each
	// worker has one at most.
	var served atomic.Int64
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		unauthorized(w, r)
	}))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			for range perWorker {
				w := serve(h, "POST", "/login")
				if w.Code != http.StatusUnauthorized && w.Code != http.StatusTooManyRequests {
					t.Errorf("got %d, want 401 or 429", w.Code)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := served.Load(); got < quota || got > quota+workers {
		t.Errorf("served %d failures, want from %d to quota + the requests in flight at once (%d)", got, quota, quota+workers)
	}
	if count, err := c.Get(t.Context(), prefix+"{race|*|ip:192.0.2.1}:f60000").Int(); err != nil || count != quota {
		t.Errorf("the counter holds %d (%v), want exactly the quota, %d", count, err, quota)
	}
	if w := serve(h, "POST", "/login"); w.Code != http.StatusTooManyRequests {
		t.Errorf("after the race: got %d, want 429", w.Code)
	}
}

// TestCountOnlyWriter: the ResponseWriter a count-only handler gets
// records the status (200 when none is written), flushes, refuses to
// hijack a writer that cannot, and unwraps to the server's writer.
func TestCountOnlyWriter(t *testing.T) {
	t.Parallel()
	var counted atomic.Int64
	l := newLimiter(t, newMemory(t), "writer", ratelimit.WithCountOnly(func(status int) bool {
		counted.Add(1)
		return false
	}), ratelimit.WithLimits(ratelimit.PerMinute(10)))
	tests := []struct {
		name    string
		handler http.HandlerFunc
		check   func(t *testing.T, w *httptest.ResponseRecorder)
	}{
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, nil},
		{"flush", func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush()
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("ResponseController.Flush: %v", err)
			}
		}, func(t *testing.T, w *httptest.ResponseRecorder) {
			if !w.Flushed {
				t.Errorf("the server's writer was not flushed")
			}
		}},
		{"hijack", func(w http.ResponseWriter, _ *http.Request) {
			if _, _, err := w.(http.Hijacker).Hijack(); !errors.Is(err, http.ErrNotSupported) {
				t.Errorf("Hijack on a recorder: got %v, want ErrNotSupported", err)
			}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			l.Handler(tt.handler).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != 200 {
				t.Errorf("got %d, want 200", w.Code)
			}
			if tt.check != nil {
				tt.check(t, w)
			}
		})
	}
	if counted.Load() != int64(len(tests)) {
		t.Errorf("the count function saw %d responses, want %d", counted.Load(), len(tests))
	}
}

// TestCountOnlyFinishIsANoOpOtherwise: Finish does nothing for a Limiter
// that counts every request.
func TestCountOnlyFinishIsANoOpOtherwise(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, newMemory(t), "finish", ratelimit.WithLimits(ratelimit.PerMinute(1)))
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	if err := l.Finish(r, 500); err != nil {
		t.Fatal(err)
	}
	if w := serve(l.Handler(http.HandlerFunc(unauthorized)), "GET", "/"); w.Code != 401 {
		t.Errorf("got %d, want 401: Finish spent the quota", w.Code)
	}
}
