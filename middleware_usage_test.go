package ratelimit_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// tokens is a limit of 100 units a minute charged from usage.
var tokens = ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100, Window: time.Minute, Usage: true, Name: "tokens"}

// remaining returns what r's RateLimit field says the tokens policy has
// left.
func remaining(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	sent := w.Result().Header // as sent: a later Charge changes only the handler's map
	for _, item := range strings.Split(sent.Get("RateLimit"), ", ") {
		if name, params, ok := strings.Cut(item, ";"); ok && name == `"tokens"` {
			r, _, _ := strings.Cut(strings.TrimPrefix(params, "r="), ";")
			return r
		}
	}
	t.Fatalf("no tokens item in RateLimit %q", sent.Get("RateLimit"))
	return ""
}

// TestUsageEndsHoweverTheHandlerEnds: the usage a handler reports is
// charged once it returns, whether it returns, panics, loses its client,
// hijacks the connection or reports nothing (then its cost is charged);
// the headers tell what remains when the usage came before them; and the
// observer sees each charge.
func TestUsageEndsHoweverTheHandlerEnds(t *testing.T) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var charged []int
	one := func(ratelimit.Request) (string, error) { return "one", nil } // the hijacked request comes from elsewhere
	l := newLimiter(t, s, "usage", ratelimit.WithLimits(tokens), ratelimit.WithKey(one), ratelimit.WithCost(func(ratelimit.Request) int { return 2 }),
		ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
			if e.Outcome == "charged" {
				mu.Lock()
				charged = append(charged, e.Cost)
				mu.Unlock()
			}
		}))
	left := func() int {
		d, err := l.Peek(httptest.NewRequest("GET", "/", nil))
		if err != nil {
			t.Fatal(err)
		}
		return d.Results()[0].Remaining
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		serve   func(h http.Handler)
		charge  int
		header  string // the tokens policy's r, "" when not checked
	}{
		{"reported before the header", func(w http.ResponseWriter, r *http.Request) {
			ratelimit.Charge(r.Context(), 7)
			ratelimit.Charge(r.Context(), 3)
			w.Write([]byte("ok"))
		}, nil, 10, "90"},
		{"reported after the header: the next response says it", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("ok"))
			ratelimit.Charge(r.Context(), 5)
		}, nil, 5, "88"}, // 90 less the cost of 2 it reserved
		{"nothing reported: the cost, the usage expected", func(w http.ResponseWriter, r *http.Request) {}, nil, 2, "83"},
		{"reported zero", func(w http.ResponseWriter, r *http.Request) { ratelimit.Charge(r.Context(), 0) }, nil, 0, "83"},
		{"a panic", func(w http.ResponseWriter, r *http.Request) {
			ratelimit.Charge(r.Context(), 4)
			panic("the handler failed")
		}, func(h http.Handler) {
			defer func() {
				if recover() == nil {
					t.Error("the panic did not reach the server")
				}
			}()
			serve(h, "GET", "/")
		}, 4, ""},
		{"the client gone", func(w http.ResponseWriter, r *http.Request) {
			ratelimit.Charge(r.Context(), 6)
		}, func(h http.Handler) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // gone before the handler ends: what it used is charged all the same
			serve(h, "GET", "/", func(r *http.Request) { *r = *r.WithContext(ctx) })
		}, 6, ""},
		{"a hijacked connection", func(w http.ResponseWriter, r *http.Request) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("Hijack: %v", err)
				return
			}
			ratelimit.Charge(r.Context(), 9)
			c.Close()
		}, func(h http.Handler) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
			bufio.NewReader(c).ReadString('\n') // the handler closed it; it returns after
		}, 9, ""},
	}
	for _, tt := range tests {
		before := left()
		h := l.Handler(tt.handler)
		var w *httptest.ResponseRecorder
		if tt.serve != nil {
			tt.serve(h)
		} else {
			w = serve(h, "GET", "/")
		}
		if tt.name == "a hijacked connection" {
			// The handler ends after the client has read: the charge, and
			// then its event, come when it does.
			waitUntil(t, "the hijacking handler to end", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return left() != before && slices.Contains(charged, 9)
			})
		}
		if got := before - left(); got != tt.charge {
			t.Errorf("%s: %d charged, want %d", tt.name, got, tt.charge)
		}
		if tt.header != "" {
			if got := remaining(t, w); got != tt.header {
				t.Errorf("%s: the response says r=%s, want %s", tt.name, got, tt.header)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{10, 5, 2, 4, 6, 9}; !slices.Equal(charged, want) { // nothing charged, no event
		t.Errorf("the observer saw charges %v, want %v", charged, want)
	}
}

// waitUntil polls cond for up to 5s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestUsageDebtDenies: a usage past what is left is charged whole, and
// the next request is denied until the debt is paid back; the request
// admitted needed room for its cost only.
func TestUsageDebtDenies(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, err := store.NewMemory(store.MemoryOptions{Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	l := newLimiter(t, s, "debt", ratelimit.WithLimits(tokens, ratelimit.PerMinute(10).Named("requests")))
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ratelimit.Charge(r.Context(), 150)
		w.Write([]byte("ok"))
	}))
	w := serve(h, "GET", "/")
	if w.Code != 200 || remaining(t, w) != "0" {
		t.Fatalf("first request: got %d, r=%s; want 200 and nothing left", w.Code, remaining(t, w))
	}
	w = serve(h, "GET", "/")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" {
		t.Fatalf("in debt: got %d, Retry-After %q; want 429 for the rest of the window, 60", w.Code, w.Header().Get("Retry-After"))
	}
	now = now.Add(time.Minute)
	if w = serve(h, "GET", "/"); w.Code != 200 {
		t.Fatalf("a window later: got %d, want 200", w.Code)
	}
}

// TestUsageWithAnEstimate: WithCost gives the usage a request is expected
// to use; a limit of requests with a Cost of 1 takes one a request, and
// the limit charged from usage needs room for the estimate before the
// handler, all in one decision.
func TestUsageWithAnEstimate(t *testing.T) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	estimate := func(r ratelimit.Request) int {
		n, _ := strconv.Atoi(r.(*http.Request).URL.Query().Get("max_tokens"))
		return n
	}
	l := newLimiter(t, s, "estimate", ratelimit.WithCost(estimate), ratelimit.WithLimits(
		ratelimit.Limit{Quota: 10, Window: time.Minute, Cost: 1, Name: "requests"},
		tokens,
	))
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ratelimit.Charge(r.Context(), 30) // used less than expected
	}))
	for i, tt := range []struct {
		maxTokens int
		want      int
		requests  int // left
		tokens    int // left
	}{
		{60, 200, 9, 70}, // room for 60 of 100: passes, charged 30
		{60, 200, 8, 40}, // room for 60 of 70
		{60, 429, 8, 40}, // no room for 60 of 40: denied, nothing taken from requests
		{40, 200, 7, 10}, // room for 40 of 40
	} {
		w := serve(h, "GET", "/?max_tokens="+strconv.Itoa(tt.maxTokens))
		d, _ := l.Peek(httptest.NewRequest("GET", "/?max_tokens=1", nil))
		if w.Code != tt.want || d.Results()[0].Remaining != tt.requests || d.Results()[1].Remaining != tt.tokens {
			t.Errorf("request %d (max_tokens %d): got %d, %d requests and %d tokens left; want %d, %d and %d",
				i, tt.maxTokens, w.Code, d.Results()[0].Remaining, d.Results()[1].Remaining, tt.want, tt.requests, tt.tokens)
		}
	}
}

// TestCountOnlyRaceBound: with WithCountOnly, a request reserves its
// attempt until its status is known, so requests in flight together when
// the quota runs out cannot overshoot it: on a real Redis, W workers
// sending failures are served exactly quota of them, the counter holds
// every one, and once it is spent every request is denied.
func TestCountOnlyRaceBound(t *testing.T) {
	t.Parallel()
	const quota, workers, perWorker = 5, 8, 20
	c, prefix := sharedRedis(t)
	l := newLimiter(t, newRedisStore(t, c, prefix), "race", ratelimit.WithCountOnly(nil),
		ratelimit.WithLimits(ratelimit.PerMinute(quota).Using(ratelimit.FixedWindow)))
	// A request is in flight from the Limiter's check to its charge; each
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
	if got := served.Load(); got != quota {
		t.Errorf("served %d failures, want the quota, %d: each request in flight reserves its attempt", got, quota)
	}
	if count, err := c.Get(t.Context(), prefix+"{race|*|ip:192.0.2.1}:f60000/u").Int(); err != nil || int64(count) != served.Load() {
		t.Errorf("the counter holds %d (%v), want every failure served, %d", count, err, served.Load())
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
	if err := l.Finish(r.Context(), 500); err != nil {
		t.Fatal(err)
	}
	if w := serve(l.Handler(http.HandlerFunc(unauthorized)), "GET", "/"); w.Code != 401 {
		t.Errorf("got %d, want 401: Finish spent the quota", w.Code)
	}
}
