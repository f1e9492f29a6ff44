package ratelimit_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// fixedStore answers every request with one preset result.
type fixedStore struct{ r ratelimit.Result }

func (s fixedStore) Allow(_ context.Context, _ string, _ int, limits ...ratelimit.Limit) (ratelimit.Decision, error) {
	r := s.r
	r.Limit = limits[0]
	r.Allowed = r.RetryAfter == 0
	return ratelimit.Decision{Allowed: r.Allowed, Results: []ratelimit.Result{r}}, nil
}

// FuzzHeaders formats rate-limit headers for arbitrary limit names and
// values: a name New accepts must always give RateLimit-Policy and
// RateLimit values that parse as RFC 9651 lists and name the limit back,
// and Retry-After a positive integer.
func FuzzHeaders(f *testing.F) {
	f.Add("api", 100, int64(60_000), 42, int64(17_000_000), int64(0))
	f.Add(`a "quoted" \ name`, 1, int64(1), 0, int64(999), int64(1))
	f.Add("", 1_000_000, int64(86_400_000), 999_999, int64(86_400_000_000), int64(86_400_000_000))
	f.Add("\x7f\x00é", 5, int64(1500), -3, int64(-5), int64(-1))
	f.Fuzz(func(t *testing.T, name string, quota int, windowMS int64, remaining int, resetUS, retryUS int64) {
		l := ratelimit.Per(quota, time.Duration(windowMS)*time.Millisecond).Using(ratelimit.FixedWindow).Named(name)
		r := ratelimit.Result{Remaining: remaining, ResetAfter: time.Duration(resetUS) * time.Microsecond, RetryAfter: time.Duration(retryUS) * time.Microsecond}
		if r.Remaining < 0 || r.ResetAfter < 0 || r.RetryAfter < 0 {
			return // not a result any store returns
		}
		lim, err := ratelimit.New(fixedStore{r}, ratelimit.WithLimits(l), ratelimit.WithNamespace("fuzz"))
		if err != nil {
			return // refused when built: never formatted
		}
		w := serve(lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "GET", "/")
		policy, err := parseSFList(w.Header().Get("RateLimit-Policy"))
		if err != nil || len(policy) != 1 {
			t.Fatalf("RateLimit-Policy %q: %v", w.Header().Get("RateLimit-Policy"), err)
		}
		if name != "" && policy[0].name != name {
			t.Fatalf("RateLimit-Policy names %q, want %q", policy[0].name, name)
		}
		current, err := parseSFList(w.Header().Get("RateLimit"))
		wantR := min(int64(remaining), 999_999_999_999_999) // RFC 9651 integers have at most 15 digits
		if err != nil || len(current) != 1 || current[0].name != policy[0].name || current[0].params["r"] != wantR {
			t.Fatalf("RateLimit %q: %+v, %v", w.Header().Get("RateLimit"), current, err)
		}
		if w.Code == http.StatusTooManyRequests {
			if v := w.Header().Get("Retry-After"); v == "" || v[0] == '0' || v[0] == '-' {
				t.Fatalf("Retry-After %q on a 429", v)
			}
		}
	})
}
