package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
	"github.com/ratelimit-go/ratelimit/redistest"
	"github.com/ratelimit-go/ratelimit/store"
)

func TestNewReportsBadInput(t *testing.T) {
	s := adaptertest.NewStore(t)
	ok := ratelimit.WithLimits(ratelimit.PerMinute(10))
	tests := []struct {
		name  string
		store ratelimit.Store
		opts  []ratelimit.Option
		want  string
	}{
		{"nil store", nil, []ratelimit.Option{ok}, "New: the store is nil"},
		{"no limits", s, nil, "New: no limits"},
		{"nil option", s, []ratelimit.Option{ok, nil}, "New: option 1 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(tt.store, "test", tt.opts...)
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid saying %q", l, err, tt.want)
			}
		})
	}
}

func TestNewChecksTheNamespace(t *testing.T) {
	s := adaptertest.NewStore(t)
	limits := ratelimit.WithLimits(ratelimit.PerMinute(10))
	for _, ns := range []string{"", strings.Repeat("n", 65), "a|b", "a b", "a:b", "a{b}", "café", "a\x00"} {
		t.Run(fmt.Sprintf("%q", ns), func(t *testing.T) {
			l, err := ratelimit.New(s, ns, limits)
			if want := fmt.Sprintf("namespace %q", ns); !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got (%v, %v), want ErrInvalid naming %s", l, err, want)
			}
		})
	}
	for _, ns := range []string{"a", strings.Repeat("n", 64), "api", "Login-v2.eu_west", "0"} {
		if _, err := ratelimit.New(s, ns, limits); err != nil {
			t.Errorf("New with namespace %q: got %v, want nil", ns, err)
		}
	}
}

// The tests below run on the package's shared redis-server, each under a
// prefix of its own.

var prefixes atomic.Int64

// sharedRedis returns a new client of the shared redis-server and a key
// prefix no other test uses.
func sharedRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	c := newClient(t, redistest.Shared(t).Addr)
	return c, fmt.Sprintf("rt%d:", prefixes.Add(1))
}

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func newRedisStore(t *testing.T, c store.RedisClient, prefix string) *store.Redis {
	t.Helper()
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: prefix})
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	return s
}

// counterKeys returns the keys of Limiters' counters under prefix, sorted:
// those with a '|', which the store's own probe keys lack.
func counterKeys(t *testing.T, c *redis.Client, prefix string) []string {
	t.Helper()
	return scanKeys(t, c, prefix+"{*|*")
}

// scanKeys returns the keys matching pattern, sorted.
func scanKeys(t *testing.T, c *redis.Client, pattern string) []string {
	t.Helper()
	var keys []string
	iter := c.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN %s: %v", pattern, err)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// step is one request and its expected status and X-RateLimit-Remaining.
type step struct {
	h         http.Handler
	method    string
	path      string
	status    int
	remaining string
}

func runSteps(t *testing.T, steps []step) {
	t.Helper()
	for i, st := range steps {
		w := serve(st.h, st.method, st.path)
		if got := w.Header().Get("X-RateLimit-Remaining"); w.Code != st.status || got != st.remaining {
			t.Errorf("step %d, %s %s: got %d with %q remaining, want %d with %q", i, st.method, st.path, w.Code, got, st.status, st.remaining)
		}
	}
}

// TestNamespacesNeverShareCounters: two Limiters on one store object, with
// the same limits and the same client, count apart when their namespaces
// differ; the keys in Redis say so.
func TestNamespacesNeverShareCounters(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	s := newRedisStore(t, c, prefix)
	limits := ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow))
	api := newLimiter(t, s, "api", limits).Handler(http.HandlerFunc(adaptertest.OK))
	login := newLimiter(t, s, "login", limits).Handler(http.HandlerFunc(adaptertest.OK))
	runSteps(t, []step{
		{api, "GET", "/", 200, "1"},
		{api, "GET", "/", 200, "0"},
		{api, "GET", "/", 429, "0"},
		{login, "GET", "/", 200, "1"},
		{login, "GET", "/", 200, "0"},
		{login, "GET", "/", 429, "0"},
	})
	want := []string{prefix + "{api|*|ip:192.0.2.1}:f60000", prefix + "{login|*|ip:192.0.2.1}:f60000"}
	if got := counterKeys(t, c, prefix); !slices.Equal(got, want) {
		t.Errorf("keys in Redis: got %q, want %q", got, want)
	}
}

// TestNamespaceIsSharedAcrossStores: Limiters of one namespace share their
// counters whatever store objects they use, as the instances of a service
// do: two Redis stores over one server, and a Fallback over a third.
func TestNamespaceIsSharedAcrossStores(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	first := newRedisStore(t, c, prefix)
	second := newRedisStore(t, newClient(t, c.Options().Addr), prefix)
	fallback, err := store.NewFallback(newRedisStore(t, newClient(t, c.Options().Addr), prefix), store.FallbackOptions{Logger: discardLogger})
	if err != nil {
		t.Fatalf("NewFallback: %v", err)
	}
	t.Cleanup(func() { fallback.Close() })

	limits := ratelimit.WithLimits(ratelimit.PerMinute(4).Using(ratelimit.FixedWindow))
	var handlers []http.Handler
	var limiters []*ratelimit.Limiter
	var seen counts
	for _, s := range []ratelimit.Store{first, second, fallback} {
		l := newLimiter(t, s, "shared", limits, ratelimit.WithObserver(seen.observe))
		limiters = append(limiters, l)
		handlers = append(handlers, l.Handler(http.HandlerFunc(adaptertest.OK)))
	}
	runSteps(t, []step{
		{handlers[0], "GET", "/", 200, "3"},
		{handlers[1], "GET", "/", 200, "2"},
		{handlers[2], "GET", "/", 200, "1"},
		{handlers[1], "GET", "/", 200, "0"},
		{handlers[0], "GET", "/", 429, "0"},
		{handlers[2], "GET", "/", 429, "0"},
	})
	if seen.fallback != 0 {
		t.Errorf("the Fallback decided %d requests in process, want 0: Redis was up", seen.fallback)
	}
	want := []string{prefix + "{shared|*|ip:192.0.2.1}:f60000"}
	if got := counterKeys(t, c, prefix); !slices.Equal(got, want) {
		t.Errorf("keys in Redis: got %q, want %q", got, want)
	}
}
