package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// recorder keeps the events an observer is given.
type recorder struct{ events []ratelimit.Event }

func (rec *recorder) observe(_ ratelimit.Request, e ratelimit.Event) {
	rec.events = append(rec.events, e)
}

// outcomes returns the recorded outcomes, in order.
func (rec *recorder) outcomes() []string {
	var os []string
	for _, e := range rec.events {
		os = append(os, e.Outcome)
	}
	return os
}

// slowStore delays every answer of its store by at least d, so that an
// Event's latency has a lower bound to check.
type slowStore struct {
	ratelimit.Store
	d time.Duration
}

func (s slowStore) Allow(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	time.Sleep(s.d)
	return s.Store.Allow(ctx, key, cost, limits)
}

func TestObserverOutcomes(t *testing.T) {
	login := ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("login")
	burst := ratelimit.PerSecond(100).Using(ratelimit.TokenBucket).Named("burst")
	noKey := func(ratelimit.Request) (string, error) { return "", ratelimit.ErrInvalid }
	for _, tt := range []struct {
		name  string
		store ratelimit.Store
		opts  []ratelimit.Option
		ctx   func() context.Context
		want  []string
	}{
		{"allowed then denied", nil, nil, nil,
			[]string{"allowed", "allowed", "denied", "denied"}},
		{"dry run", nil, []ratelimit.Option{ratelimit.WithDryRun(func(ratelimit.Request, ratelimit.Decision) {})}, nil,
			[]string{"allowed", "allowed", "would_deny", "would_deny"}},
		{"ban", nil, []ratelimit.Option{ratelimit.WithBan(ratelimit.Ban{After: 1, Within: time.Minute, For: time.Hour})}, nil,
			[]string{"allowed", "allowed", "banned", "banned"}},
		{"store error", failing{errors.New("redis: connection refused")}, nil, nil,
			[]string{"store_error", "store_error", "store_error", "store_error"}},
		{"canceled", failing{context.Canceled}, nil, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, []string{"canceled", "canceled", "canceled", "canceled"}},
		{"no key", nil, []ratelimit.Option{ratelimit.WithKey(noKey)}, nil,
			[]string{"bad_request", "bad_request", "bad_request", "bad_request"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.store
			if s == nil {
				s = slowStore{adaptertest.NewStore(t), time.Millisecond}
			}
			rec := &recorder{}
			opts := append([]ratelimit.Option{
				ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {login, burst}}),
				ratelimit.WithCost(func(ratelimit.Request) int { return 1 }),
				ratelimit.WithObserver(rec.observe),
				quietLogs(),
			}, tt.opts...)
			h := newLimiter(t, s, "auth", opts...).Handler(http.HandlerFunc(adaptertest.OK))
			for range 4 {
				serve(h, "POST", "/login", func(r *http.Request) {
					if tt.ctx != nil {
						*r = *r.WithContext(tt.ctx())
					}
				})
			}
			serve(h, "GET", "/other") // no limits apply: not observed
			if got := rec.outcomes(); !slices.Equal(got, tt.want) {
				t.Fatalf("got outcomes %v, want %v", got, tt.want)
			}
			for i, e := range rec.events {
				if e.Namespace != "auth" || e.Route != "POST /login" {
					t.Errorf("event %d: got namespace %q, route %q, want auth, POST /login", i, e.Namespace, e.Route)
				}
				switch e.Outcome {
				case "allowed", "denied", "banned", "would_deny":
					checkDecidedEvent(t, i, e)
				case "bad_request":
					if e.Latency != 0 || e.Cost != 0 || !errors.Is(e.Err, ratelimit.ErrInvalid) {
						t.Errorf("event %d: a request without a key: got latency %v, cost %d, err %v; want 0, 0, ErrInvalid", i, e.Latency, e.Cost, e.Err)
					}
				default:
					if e.Err == nil || e.Cost != 1 || e.Decision.Allowed || len(e.Decision.Results()) != 0 {
						t.Errorf("event %d (%v): got err %v, cost %d, decision %+v; want the store's error, cost 1, no decision", i, e.Outcome, e.Err, e.Cost, e.Decision)
					}
				}
			}
		})
	}
}

// checkDecidedEvent checks an event the store decided: it names both
// limits, the store took at least slowStore's delay, and only the login
// limit denies.
func checkDecidedEvent(t *testing.T, i int, e ratelimit.Event) {
	t.Helper()
	if e.Cost != 1 || e.Err != nil {
		t.Errorf("event %d: got cost %d, err %v; want 1, nil", i, e.Cost, e.Err)
	}
	if e.Latency < time.Millisecond {
		t.Errorf("event %d: latency %v, want at least the store's 1ms", i, e.Latency)
	}
	rs := e.Decision.Results()
	if len(rs) != 2 || rs[0].Limit.Name != "login" || rs[1].Limit.Name != "burst" {
		t.Fatalf("event %d: got results %+v, want login and burst", i, rs)
	}
	if !rs[1].Allowed && e.Decision.Banned == 0 {
		t.Errorf("event %d: the burst limit denied", i)
	}
	if allowed := e.Outcome == "allowed"; e.Decision.Allowed != allowed || rs[0].Allowed != allowed {
		t.Errorf("event %d: outcome %v with decision %+v", i, e.Outcome, e.Decision)
	}
}

func TestObserversInOrder(t *testing.T) {
	var calls []string
	l := newLimiter(t, adaptertest.NewStore(t), "test",
		ratelimit.WithLimits(ratelimit.PerMinute(5)),
		ratelimit.WithObserver(func(ratelimit.Request, ratelimit.Event) { calls = append(calls, "first") }),
		ratelimit.WithObserver(func(ratelimit.Request, ratelimit.Event) { calls = append(calls, "second") }),
		ratelimit.WithSkip(func(r ratelimit.Request) bool { return r.(*http.Request).URL.Path == "/health" }))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	serve(h, "GET", "/")
	serve(h, "GET", "/health") // skipped: not observed
	if strings.Join(calls, ",") != "first,second" {
		t.Errorf("got calls %v, want first then second, once", calls)
	}
	if _, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(5)), ratelimit.WithObserver(nil)); !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "WithObserver") {
		t.Errorf("a nil observer: got %v, want ErrInvalid naming WithObserver", err)
	}
}

// TestObserverAllocatesNothing: an observer costs the middleware no
// allocation per request, allowed or denied.
func TestObserverAllocatesNothing(t *testing.T) {
	for _, quota := range []int{1_000_000, 1} {
		allocs := func(opts ...ratelimit.Option) float64 {
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l := newLimiter(t, s, "bench", append(opts, ratelimit.WithLimits(ratelimit.PerMinute(quota).Using(ratelimit.FixedWindow)))...)
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest("GET", "/", nil)
			w := &discard{h: http.Header{}}
			h.ServeHTTP(w, r)
			return testing.AllocsPerRun(200, func() {
				clear(w.h)
				h.ServeHTTP(w, r)
			})
		}
		var n int
		without := allocs()
		with := allocs(ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) { n += e.Cost }))
		if with != without {
			t.Errorf("quota %d: %v allocations per request with an observer, %v without", quota, with, without)
		}
		if n == 0 {
			t.Errorf("quota %d: the observer was not called", quota)
		}
	}
}

// TestObserverThroughFallback: the production configuration, Redis in a
// Fallback, on a real redis-server: the observer sees Redis's decisions,
// then, once the server is killed, the fallback's, flagged as such.
func TestObserverThroughFallback(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	c := newClient(t, srv.Addr)
	fallback, err := store.NewFallback(newRedisStore(t, c, "obs:"), steadyFallback)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fallback.Close() })
	rec := &recorder{}
	h := newLimiter(t, fallback, "api", ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.SlidingLog).Named("api")),
		ratelimit.WithObserver(rec.observe), quietLogs()).Handler(http.HandlerFunc(adaptertest.OK))
	for range 3 {
		serve(h, "GET", "/")
	}
	srv.Kill()
	// Another client: the first one's denial is in the deny cache.
	serve(h, "GET", "/", func(r *http.Request) { r.RemoteAddr = "192.0.2.2:1234" })
	want := []string{"allowed", "allowed", "denied", "allowed"}
	if got := rec.outcomes(); !slices.Equal(got, want) {
		t.Fatalf("got outcomes %v, want %v", got, want)
	}
	for i, e := range rec.events {
		if fell := i == 3; e.Decision.Fallback != fell || e.Latency <= 0 || e.Route != "" || e.Decision.Results()[0].Limit.Name != "api" {
			t.Errorf("event %d: got fallback %v, latency %v, route %q, results %+v; want fallback %v, a latency, no route, the api limit",
				i, e.Decision.Fallback, e.Latency, e.Route, e.Decision.Results(), fell)
		}
	}
}

// unauthorized answers 401, as a failed login does.
var unauthorized = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })

// outcomeStore decides by the client key it is given: "allow", "deny",
// "fallback" (allowed in process), "fail", or the context's error.
var outcomeStore storeFunc = func(ctx context.Context, key string, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.Decision{}, err
	}
	r := ratelimit.Result{Limit: limits.All()[0], Allowed: true}
	fallback := false
	switch key[strings.LastIndexByte(key, '|')+1:] {
	case "deny":
		r.Allowed, r.RetryAfter = false, 1
	case "fallback":
		fallback = true
	case "fail":
		return ratelimit.Decision{}, errors.New("connection reset")
	}
	d := ratelimit.MakeDecision(r)
	d.Fallback = fallback
	return d, nil
}

// TestObserverCountsOutcomes: an observer sees every request once, by
// outcome, a fallback decision also as allowed or denied; a request whose
// client left is canceled and is not logged.
func TestObserverCountsOutcomes(t *testing.T) {
	counts := map[string]int{}
	fallback := 0
	count := func(_ ratelimit.Request, e ratelimit.Event) { // requests are served one at a time
		counts[e.Outcome]++
		if e.Decision.Fallback {
			fallback++
		}
	}
	var logs bytes.Buffer
	outcome := func(r ratelimit.Request) (string, error) {
		if v := r.(*http.Request).Header.Get("X-Outcome"); v != "" {
			return v, nil
		}
		return "", ratelimit.ErrInvalid
	}
	l := newLimiter(t, outcomeStore, "test", ratelimit.WithKey(outcome), ratelimit.WithLimits(ratelimit.PerMinute(10)),
		ratelimit.WithObserver(count), ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	steps := []struct {
		outcome string
		status  int
	}{
		{"allow", 200}, {"allow", 200}, {"deny", 429}, {"fallback", 200}, {"fail", 200}, {"", 400},
	}
	for _, st := range steps {
		if w := serve(h, "GET", "/", withHeader("X-Outcome", st.outcome)); w.Code != st.status {
			t.Errorf("%q: got %d, want %d", st.outcome, w.Code, st.status)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
	r.Header.Set("X-Outcome", "allow")
	w := httptest.NewRecorder()
	if h.ServeHTTP(w, r); w.Code != 200 {
		t.Errorf("canceled: got %d, want 200 (fail open)", w.Code)
	}

	want := map[string]int{"allowed": 3, "denied": 1, "store_error": 1, "canceled": 1, "bad_request": 1}
	if !maps.Equal(counts, want) || fallback != 1 {
		t.Errorf("got %v and %d decided in process, want %v and 1", counts, fallback, want)
	}
	if n := strings.Count(logs.String(), "\n"); n != 2 || !strings.Contains(logs.String(), "store failed") || !strings.Contains(logs.String(), "request not decided") {
		t.Errorf("got %d log lines %q, want one for the store failure and one for the missing key", n, logs.String())
	}
}

// counts is an observer counting the requests a Limiter saw by outcome,
// and those an in-process fallback decided.
type counts struct {
	mu       sync.Mutex
	by       map[string]int
	fallback int
}

func (c *counts) observe(_ ratelimit.Request, e ratelimit.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]int{}
	}
	c.by[e.Outcome]++
	if e.Decision.Fallback {
		c.fallback++
	}
}

// of returns how many requests had outcome.
func (c *counts) of(outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[outcome]
}

// TestLogsAreThrottled: a Limiter logs at most one line a second of each
// kind, however many requests fail.
func TestLogsAreThrottled(t *testing.T) {
	var logs bytes.Buffer
	var seen counts
	l := newLimiter(t, failing{errors.New("down")}, "test", ratelimit.WithLimits(ratelimit.PerMinute(1)), ratelimit.WithObserver(seen.observe),
		ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	for range 100 {
		serve(h, "GET", "/")
	}
	for range 100 {
		serve(h, "GET", "/", func(r *http.Request) { r.RemoteAddr = "@" }) // no key
	}
	for _, msg := range []string{"store failed", "request not decided"} {
		if n := strings.Count(logs.String(), msg); n < 1 || n > 2 {
			t.Errorf("100 failures within a second logged %d lines %q, want 1 (2 if a second turned)", n, msg)
		}
	}
	if errs, bad := seen.of("store_error"), seen.of("bad_request"); errs != 100 || bad != 100 {
		t.Errorf("observed %d store errors and %d bad requests, want 100 of each: the lines held back are still observed", errs, bad)
	}
}
