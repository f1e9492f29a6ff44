package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
)

// outcomeStore decides by the client key it is given: "allow", "deny",
// "fallback" (allowed in process), "fail", or the context's error.
type outcomeStore struct{}

func (outcomeStore) Allow(ctx context.Context, key string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
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

func (s outcomeStore) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return s.Allow(ctx, key, cost, limits)
}

func (outcomeStore) Reset(context.Context, string, *ratelimit.Limits) error { return nil }

// TestObserverCountsOutcomes: an observer sees every request once, by
// outcome, a fallback decision also as allowed or denied; a request whose
// client left is canceled and is not logged.
func TestObserverCountsOutcomes(t *testing.T) {
	counts := map[string]int{}
	fallback := 0
	count := func(_ *http.Request, e ratelimit.Event) { // requests are served one at a time
		counts[e.Outcome]++
		if e.Decision.Fallback {
			fallback++
		}
	}
	var logs bytes.Buffer
	outcome := func(r *http.Request) (string, error) {
		if v := r.Header.Get("X-Outcome"); v != "" {
			return v, nil
		}
		return "", ratelimit.ErrInvalid
	}
	l := newLimiter(t, outcomeStore{}, "test", ratelimit.WithKey(outcome), ratelimit.WithLimits(ratelimit.PerMinute(10)),
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

func (c *counts) observe(_ *http.Request, e ratelimit.Event) {
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
