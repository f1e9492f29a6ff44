package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
	"github.com/ratelimit-go/ratelimit/store"
)

// plans is a limits function: keys beginning with "pro-" get 3 a minute,
// others 1, both fixed windows, so that a plan change keeps the count.
func plans(r *http.Request) []ratelimit.Limit {
	if strings.HasPrefix(r.Header.Get("X-API-Key"), "pro-") {
		return []ratelimit.Limit{ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("pro")}
	}
	return []ratelimit.Limit{ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("free")}
}

// TestLimitsPerRequest: one Limiter applies each caller's plan, on a real
// Redis, and a caller who upgrades keeps what it spent.
func TestLimitsPerRequest(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	l := newLimiter(t, newRedisStore(t, c, prefix), "plans", ratelimit.WithKey(ratelimit.Route), ratelimit.WithLimitsFunc(plans))
	mux := http.NewServeMux()
	mux.Handle("GET /api/", l.Handler(http.HandlerFunc(adaptertest.OK)))
	type step struct {
		apiKey    string
		status    int
		policy    string
		remaining string
	}
	// Keyed by route, so both plans count into one counter: a caller who
	// changes plan keeps its count.
	for i, s := range []step{
		{"free-1", 200, `"free";q=1;w=60`, "0"},
		{"free-1", 429, `"free";q=1;w=60`, "0"},
		{"pro-1", 200, `"pro";q=3;w=60`, "1"}, // 1 spent under free
		{"pro-1", 200, `"pro";q=3;w=60`, "0"},
		{"pro-1", 429, `"pro";q=3;w=60`, "0"},
	} {
		w := serve(mux, "GET", "/api/x", withHeader("X-API-Key", s.apiKey))
		if w.Code != s.status || w.Header().Get("RateLimit-Policy") != s.policy || w.Header().Get("X-RateLimit-Remaining") != s.remaining {
			t.Errorf("request %d (%s): got %d, policy %q, remaining %q; want %d, %q, %q", i, s.apiKey, w.Code,
				w.Header().Get("RateLimit-Policy"), w.Header().Get("X-RateLimit-Remaining"), s.status, s.policy, s.remaining)
		}
	}
	if n := ratelimit.SetsKept(l); n != 2 {
		t.Errorf("sets kept after five requests of two plans: %d, want 2, each checked once", n)
	}
	keys := counterKeys(t, c, prefix)
	if want := prefix + "{plans|*|route:GET /api/}:f60000"; len(keys) != 1 || keys[0] != want {
		t.Errorf("keys %q, want one: %q", keys, want)
	}
}

// TestLimitsFuncFallsBack: a limits function that returns none leaves the
// route's limits, or those of WithLimits, in force.
func TestLimitsFuncFallsBack(t *testing.T) {
	t.Parallel()
	none := func(r *http.Request) []ratelimit.Limit {
		if r.Header.Get("X-Plan") == "" {
			return nil
		}
		return []ratelimit.Limit{ratelimit.PerMinute(5).Using(ratelimit.FixedWindow).Named("plan")}
	}
	l := newLimiter(t, newMemory(t), "fallback", ratelimit.WithLimitsFunc(none),
		ratelimit.WithLimits(ratelimit.PerMinute(1).Named("all")),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(2).Named("login")}}))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	for _, tt := range []struct {
		method, path, plan, policy string
	}{
		{"GET", "/", "", `"all";q=1;w=60`},
		{"POST", "/login", "", `"login";q=2;w=60`},
		{"POST", "/login", "yes", `"plan";q=5;w=60`},
		{"GET", "/", "yes", `"plan";q=5;w=60`},
	} {
		w := serve(h, tt.method, tt.path, withHeader("X-Plan", tt.plan))
		if got := w.Header().Get("RateLimit-Policy"); w.Code != 200 || got != tt.policy {
			t.Errorf("%s %s, plan %q: got %d %q, want 200 %q", tt.method, tt.path, tt.plan, w.Code, got, tt.policy)
		}
	}
}

// countingStore counts the calls that reach it.
type countingStore struct {
	ratelimit.Store
	calls atomic.Int64
}

func (s *countingStore) Allow(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	s.calls.Add(1)
	return s.Store.Allow(ctx, key, cost, limits)
}

// TestLimitsFuncInvalid: invalid limits from the function reach the error
// handler, naming the fault, and nothing is counted; the set is checked
// once however often it comes back.
func TestLimitsFuncInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		limits []ratelimit.Limit
		want   string
	}{
		{"zero quota", []ratelimit.Limit{ratelimit.PerMinute(0)}, "limits[0].Quota must be at least 1"},
		{"two in one place", []ratelimit.Limit{ratelimit.PerMinute(1), ratelimit.PerMinute(2)}, "would count into one place"},
		{"too many", make([]ratelimit.Limit, 9), "returned 9 limits; at most 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &countingStore{Store: newMemory(t)}
			var got []error
			l := newLimiter(t, s, "invalid", quietLogs(),
				ratelimit.WithLimitsFunc(func(*http.Request) []ratelimit.Limit { return tt.limits }),
				ratelimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) bool {
					got = append(got, err)
					return ratelimit.FailOpen(w, r, err)
				}))
			h := l.Handler(http.HandlerFunc(adaptertest.OK))
			for range 3 {
				if w := serve(h, "GET", "/"); w.Code != http.StatusBadRequest {
					t.Errorf("got %d, want 400", w.Code)
				}
			}
			if s.calls.Load() != 0 {
				t.Errorf("the store was asked %d times, want never", s.calls.Load())
			}
			if len(got) != 3 || !errors.Is(got[0], ratelimit.ErrInvalid) || !strings.Contains(got[0].Error(), tt.want) {
				t.Fatalf("errors %v, want 3 wrapping ErrInvalid, mentioning %q", got, tt.want)
			}
			if want := 1; tt.name != "too many" && ratelimit.SetsKept(l) != want {
				t.Errorf("sets kept: %d, want %d: an invalid set is remembered as invalid", ratelimit.SetsKept(l), want)
			}
		})
	}
}

// TestLimitsFuncIsBounded: a function returning a new set for every
// request does not grow the Limiter without bound.
func TestLimitsFuncIsBounded(t *testing.T) {
	t.Parallel()
	n := 0
	l := newLimiter(t, newMemory(t), "bounded", ratelimit.WithLimitsFunc(func(*http.Request) []ratelimit.Limit {
		n++
		return []ratelimit.Limit{ratelimit.PerMinute(n).Named("q" + strconv.Itoa(n))}
	}))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	for range 3000 {
		if w := serve(h, "GET", "/"); w.Code != 200 {
			t.Fatalf("got %d, want 200", w.Code)
		}
	}
	if kept := ratelimit.SetsKept(l); kept > 1024 {
		t.Errorf("sets kept after 3,000 distinct ones: %d, want at most 1,024", kept)
	}
}

func TestWithLimitsFuncNil(t *testing.T) {
	_, err := ratelimit.New(newMemory(t), "nil", ratelimit.WithLimitsFunc(nil))
	if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "WithLimitsFunc") {
		t.Errorf("got %v, want ErrInvalid naming WithLimitsFunc", err)
	}
	if _, err := ratelimit.New(newMemory(t), "only", ratelimit.WithLimitsFunc(plans)); err != nil {
		t.Errorf("a limits function alone: got %v, want no error", err)
	}
}

// newMemory returns a Memory store with the default options.
func newMemory(t testing.TB) *store.Memory {
	t.Helper()
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
