package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
	"github.com/redis/go-redis/v9"
)

// netHTTP serves the test app with Go's ServeMux, the Limiter wrapping
// each route's handler.
var netHTTP = adaptertest.Framework{
	Pattern: func(r adaptertest.Route) string {
		return r.Method + " " + strings.ReplaceAll(r.Path, ":id", "{id}")
	},
	Routes: ratelimit.WithRoutes,
	Serve: func(t *testing.T, ls ...*ratelimit.Limiter) http.Handler {
		mux := http.NewServeMux()
		for _, r := range adaptertest.App {
			pattern := r.Method + " " + strings.ReplaceAll(r.Path, ":id", "{id}")
			if r.Path == "/" {
				pattern += "{$}"
			}
			var h http.Handler = http.HandlerFunc(adaptertest.OK)
			for i := len(ls) - 1; i >= 0; i-- {
				h = ls[i].Handler(h)
			}
			mux.Handle(pattern, h)
		}
		return mux
	},
	Placements: []adaptertest.Placement{
		{Name: "around the ServeMux", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			mux := http.NewServeMux()
			for _, r := range app {
				mux.HandleFunc(r.ServeMux(), adaptertest.OK)
			}
			return l.Handler(mux)
		}},
		{Name: "inside the ServeMux", Serve: func(l *ratelimit.Limiter, app []adaptertest.Route) http.Handler {
			mux := http.NewServeMux()
			for _, r := range app {
				mux.Handle(r.ServeMux(), l.Handler(http.HandlerFunc(adaptertest.OK)))
			}
			return mux
		}},
	},
}

func TestHTTPCases(t *testing.T) { adaptertest.Run(t, netHTTP) }

// newLimiter is ratelimit.New, failing t on an error.
func newLimiter(t testing.TB, s ratelimit.Store, namespace string, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(s, namespace, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// serve sends a request from 192.0.2.1 to h and returns the response.
func serve(h http.Handler, method, path string, mod ...func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for _, m := range mod {
		m(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func withHeader(name, value string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set(name, value) }
}

var discardLogger = slog.New(slog.DiscardHandler)

// steadyFallback configures a Fallback for tests on a healthy Redis: a
// busy machine holds a call up past the default budget of 50ms, which the
// Fallback rightly takes for Redis failing.
var steadyFallback = store.FallbackOptions{Budget: 5 * time.Second, Logger: discardLogger}

func quietLogs() ratelimit.Option { return ratelimit.WithLogger(discardLogger) }

// capacity is the most units l holds at once.
func capacity(l ratelimit.Limit) int {
	if l.Algorithm == ratelimit.TokenBucket && l.Burst != 0 {
		return l.Burst
	}
	return l.Quota
}

func TestReset(t *testing.T) {
	login := ratelimit.PerMinute(2).Using(ratelimit.SlidingLog)
	l := newLimiter(t, adaptertest.NewStore(t), "test", ratelimit.WithLimits(login))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	serve(h, "POST", "/login")
	serve(h, "POST", "/login")
	if w := serve(h, "POST", "/login"); w.Code != 429 {
		t.Fatalf("third attempt: got %d, want 429", w.Code)
	}
	r := httptest.NewRequest("POST", "/login", nil)
	r.RemoteAddr = "192.0.2.1:999"
	if err := l.Reset(r); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if w := serve(h, "POST", "/login"); w.Code != 200 {
		t.Errorf("after Reset: got %d, want 200", w.Code)
	}

	down := newLimiter(t, adaptertest.Down{}, "test", ratelimit.WithLimits(login))
	if err := down.Reset(r); err == nil || errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Reset on a store that is down: got %v, want the store's error", err)
	}
	noKey := httptest.NewRequest("POST", "/login", nil)
	noKey.RemoteAddr = "@"
	if err := l.Reset(noKey); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Reset of a request without a key: got %v, want ErrInvalid", err)
	}
	routes := newLimiter(t, adaptertest.Down{}, "test", ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {login}}))
	if err := routes.Reset(httptest.NewRequest("GET", "/other", nil)); err != nil {
		t.Errorf("Reset of a request no limit applies to: got %v, want nil (the store is not asked)", err)
	}
}

// TestPeek: after 2 of 3 requests, Limiter.Peek says a request would
// pass with 1 left, and spends nothing: the next request still passes.
func TestPeek(t *testing.T) {
	m, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	login := ratelimit.PerMinute(3).Using(ratelimit.SlidingLog)
	l := newLimiter(t, m, "test", ratelimit.WithLimits(login))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	for i := range 2 {
		if w := serve(h, "POST", "/login"); w.Code != 200 {
			t.Fatalf("request %d: got %d, want 200", i, w.Code)
		}
	}
	r := httptest.NewRequest("POST", "/login", nil)
	r.RemoteAddr = "192.0.2.1:999"
	for i := range 2 {
		d, err := l.Peek(r)
		if err != nil || !d.Allowed || len(d.Results()) != 1 || d.Results()[0].Limit != login.Named("3-per-1m") || d.Results()[0].Remaining != 1 {
			t.Fatalf("Peek %d after 2 of 3 requests: got %+v, %v; want allowed with 1 remaining", i, d, err)
		}
	}
	if w := serve(h, "POST", "/login"); w.Code != 200 {
		t.Fatalf("the request after the Peeks: got %d, want 200 (a Peek spends nothing)", w.Code)
	}
	if d, err := l.Peek(r); err != nil || d.Allowed || d.Results()[0].Remaining != 0 || d.RetryAfter <= 0 {
		t.Errorf("Peek after 3 of 3 requests: got %+v, %v; want denied, 0 remaining, a RetryAfter", d, err)
	}

	costly := newLimiter(t, m, "costly", ratelimit.WithLimits(login), ratelimit.WithCost(func(ratelimit.Request) int { return 2 }))
	if d, err := costly.Peek(r); err != nil || !d.Allowed || d.Results()[0].Remaining != 3 {
		t.Errorf("Peek at cost 2 of a fresh key: got %+v, %v; want allowed, 3 remaining", d, err)
	}
	serve(costly.Handler(http.HandlerFunc(adaptertest.OK)), "POST", "/login")
	if d, err := costly.Peek(r); err != nil || d.Allowed || d.Results()[0].Remaining != 1 {
		t.Errorf("Peek at cost 2 with 1 left: got %+v, %v; want denied, 1 remaining", d, err)
	}

	routes := newLimiter(t, adaptertest.Down{}, "test", ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {login}}))
	if d, err := routes.Peek(httptest.NewRequest("GET", "/other", nil)); err != nil || d.Allowed || d.Results() != nil {
		t.Errorf("Peek of a request no limit applies to: got %+v, %v; want (Decision{}, nil), the store not asked", d, err)
	}
	down := newLimiter(t, adaptertest.Down{}, "test", ratelimit.WithLimits(login))
	if _, err := down.Peek(r); err == nil || errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Peek on a store that is down: got %v, want the store's error", err)
	}
	noKey := httptest.NewRequest("POST", "/login", nil)
	noKey.RemoteAddr = "@"
	if _, err := l.Peek(noKey); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Peek of a request without a key: got %v, want ErrInvalid", err)
	}
}

func TestDryRunReports(t *testing.T) {
	var reported []ratelimit.Decision
	l := newLimiter(t, adaptertest.NewStore(t), "test",
		ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)),
		ratelimit.WithDryRun(func(r ratelimit.Request, d ratelimit.Decision) { reported = append(reported, d) }))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	for range 3 {
		if w := serve(h, "GET", "/"); w.Code != 200 {
			t.Fatalf("dry run: got %d, want 200", w.Code)
		}
	}
	if len(reported) != 2 || reported[0].Allowed {
		t.Fatalf("got %d reports (%+v), want 2 denials", len(reported), reported)
	}
}

// storeFunc is a Store whose function answers Allow and Peek alike, from
// the context, the key and the limits asked about; it resets and ends
// nothing.
type storeFunc func(ctx context.Context, key string, limits *ratelimit.Limits) (ratelimit.Decision, error)

func (f storeFunc) Allow(ctx context.Context, key string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return f(ctx, key, limits)
}

func (f storeFunc) Peek(ctx context.Context, key string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return f(ctx, key, limits)
}

func (storeFunc) Reset(context.Context, string, *ratelimit.Limits) error { return nil }

func (storeFunc) End(context.Context, string, int, *ratelimit.Limits, ratelimit.Decision) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, nil
}

// failing is a store whose error text must never reach a client.
type failing struct{ err error }

func (f failing) Allow(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, f.err
}

func (f failing) Peek(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, f.err
}

func (f failing) Reset(context.Context, string, *ratelimit.Limits) error { return f.err }

func (f failing) End(context.Context, string, int, *ratelimit.Limits, ratelimit.Decision) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, f.err
}

func TestStoreErrors(t *testing.T) {
	secret := errors.New("dial tcp 10.20.30.40:6379: i/o timeout (password=hunter2)")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	var handled error
	custom := func(w http.ResponseWriter, r *http.Request, err error) bool {
		handled = err
		http.Error(w, "try later", http.StatusTeapot)
		return false
	}
	for _, tt := range []struct {
		name    string
		handler func(http.ResponseWriter, *http.Request, error) bool
		status  int
	}{
		{"fail open", ratelimit.FailOpen, 200},
		{"fail closed", ratelimit.FailClosed, 503},
		{"custom", custom, 418},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, failing{secret}, "test", ratelimit.WithLimits(ratelimit.PerMinute(1)), ratelimit.WithErrorHandler(tt.handler), ratelimit.WithLogger(logger))
			for _, accept := range []string{"", "application/json"} {
				w := serve(l.Handler(http.HandlerFunc(adaptertest.OK)), "GET", "/", withHeader("Accept", accept))
				if w.Code != tt.status {
					t.Errorf("got %d, want %d", w.Code, tt.status)
				}
				if body := w.Body.String(); strings.Contains(body, "10.20.30.40") || strings.Contains(body, "hunter2") {
					t.Errorf("the store's error reached the client: %q", body)
				}
			}
		})
	}
	if !errors.Is(handled, secret) {
		t.Errorf("the custom handler got %v, want the store's error", handled)
	}
	if !strings.Contains(logs.String(), "store failed") {
		t.Errorf("the failure was not logged: %q", logs.String())
	}
}

// TestLongKeysAreHashed: keys far longer than a store key may be are still
// counted apart, and a long key is counted as itself.
func TestLongKeysAreHashed(t *testing.T) {
	raw := func(r ratelimit.Request) (string, error) {
		if v := r.(*http.Request).Header.Get("X-Key"); v != "" {
			return "raw:" + v, nil
		}
		return "", ratelimit.ErrInvalid
	}
	l := newLimiter(t, adaptertest.NewStore(t), "test", ratelimit.WithKey(raw),
		ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	long := strings.Repeat("k", 5000)
	for i, tt := range []struct {
		key  string
		want int
	}{{long, 200}, {long, 429}, {long + "x", 200}, {long[:4999] + "j", 200}} {
		if w := serve(h, "GET", "/", withHeader("X-Key", tt.key)); w.Code != tt.want {
			t.Errorf("request %d: got %d, want %d", i, w.Code, tt.want)
		}
	}
}

// TestCostAgainstCapacity: a request may cost up to the smallest capacity
// of its limits; a cost outside 1 to that is the client's fault (400),
// which names the limit, not a denial and not a store failure.
func TestCostAgainstCapacity(t *testing.T) {
	limits := ratelimit.WithLimits(
		ratelimit.PerSecond(10), ratelimit.PerMinute(100), ratelimit.PerMinute(100).Using(ratelimit.FixedWindow),
		ratelimit.PerMinute(5).Using(ratelimit.TokenBucket), ratelimit.PerMinute(6).Using(ratelimit.TokenBucket))
	cost := ratelimit.WithCost(func(r ratelimit.Request) int {
		n, _ := strconv.Atoi(r.(*http.Request).Header.Get("X-Cost"))
		return n
	})
	tests := []struct {
		cost   int
		status int
		body   string // what a 400 tells the client
	}{
		{1, 200, ""},
		{5, 200, ""}, // the smallest capacity, 5 tokens
		{6, 400, `its cost, 6, is more than the limit "5-per-1m" ever holds, 5`},
		{0, 400, "its cost, 0, is below 1"},
		{-1, 400, "its cost, -1, is below 1"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.cost), func(t *testing.T) {
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var seen counts
			l := newLimiter(t, s, "test", limits, cost, quietLogs(), ratelimit.WithObserver(seen.observe))
			w := serve(l.Handler(http.HandlerFunc(adaptertest.OK)), "GET", "/", withHeader("X-Cost", strconv.Itoa(tt.cost)))
			if w.Code != tt.status {
				t.Errorf("got %d, want %d", w.Code, tt.status)
			}
			if !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("body %q, want it to say %q", w.Body.String(), tt.body)
			}
			if tt.status == 400 && (seen.of("bad_request") != 1 || seen.of("store_error") != 0) {
				t.Errorf("observed %v, want one bad request and no store error", seen.by)
			}
		})
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
	fallback, err := store.NewFallback(newRedisStore(t, newClient(t, c.Options().Addr), prefix), steadyFallback)
	if err != nil {
		t.Fatalf("NewFallback: %v", err)
	}
	t.Cleanup(func() { fallback.Close() })

	limits := ratelimit.WithLimits(ratelimit.PerMinute(4).Using(ratelimit.FixedWindow))
	var handlers []http.Handler
	var seen counts
	for _, s := range []ratelimit.Store{first, second, fallback} {
		l := newLimiter(t, s, "shared", limits, ratelimit.WithObserver(seen.observe))
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

type ctxKey struct{}

// TestDecisionsKeepTheContext: the context a handler gets behind
// Limiters still carries the server's values, deadline and cancellation,
// and its children are canceled with it.
func TestDecisionsKeepTheContext(t *testing.T) {
	lim := newLimiter(t, newMemory(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(5)))
	inner := newLimiter(t, newMemory(t), "inner", ratelimit.WithLimits(ratelimit.PerMinute(3)))
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "v"), deadline)
	var child context.Context
	var cancelChild context.CancelFunc = func() {}
	defer func() { cancelChild() }()
	var decisions []ratelimit.Decision
	h := lim.Handler(inner.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if ctx.Value(ctxKey{}) != "v" {
			t.Error("the server's context value is gone")
		}
		if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
			t.Errorf("got deadline %v, %v; want %v", d, ok, deadline)
		}
		child, cancelChild = context.WithCancel(ctx)
		decisions = ratelimit.Decisions(ctx)
	})))
	r := httptest.NewRequest("GET", "/", nil).WithContext(parent)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if len(decisions) != 2 || decisions[0].Results()[0].Remaining != 4 || decisions[1].Results()[0].Remaining != 2 {
		t.Fatalf("got decisions %+v, want the outer Limiter's (4 left), then the inner's (2 left)", decisions)
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a context derived in the handler was not canceled with the server's")
	}
	if ratelimit.Decisions(parent) != nil || ratelimit.Decisions(context.Background()) != nil {
		t.Error("a context no Limiter saw has decisions")
	}
}

// TestDecisionsOnlyOfLimitersThatDecided: a skipped request, one without
// limits, and one the store failed on add no decision; a dry run that
// would deny adds its denial.
func TestDecisionsOnlyOfLimitersThatDecided(t *testing.T) {
	mem := newMemory(t)
	skipped := newLimiter(t, mem, "skipped", ratelimit.WithLimits(ratelimit.PerMinute(1)), ratelimit.WithSkip(func(ratelimit.Request) bool { return true }))
	routed := newLimiter(t, mem, "routed", ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(1)}}))
	failed := newLimiter(t, adaptertest.Down{}, "failed", ratelimit.WithLogger(discardLogger), ratelimit.WithLimits(ratelimit.PerMinute(1)))
	dry := newLimiter(t, mem, "dry", ratelimit.WithLimits(ratelimit.PerMinute(1).Named("dry")), ratelimit.WithDryRun(func(ratelimit.Request, ratelimit.Decision) {}))
	var got []ratelimit.Decision
	h := skipped.Handler(routed.Handler(failed.Handler(dry.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = ratelimit.Decisions(r.Context())
	})))))
	for i, want := range []bool{true, false} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		if len(got) != 1 || got[0].Results()[0].Limit.Name != "dry" || got[0].Allowed != want {
			t.Fatalf("request %d: got %+v, want only the dry run's decision, allowed %v", i, got, want)
		}
	}
}

// TestCostSeesTheMatchedRoute: a Limiter around a whole ServeMux matches
// the request against its own table, and the cost and limits functions
// see that pattern as r.Pattern; a router's own pattern wins.
func TestCostSeesTheMatchedRoute(t *testing.T) {
	var costSaw, limitsSaw string
	l := newLimiter(t, newMemory(t), "test",
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(5)}, "/api/{id}": {ratelimit.PerMinute(10)}}),
		ratelimit.WithCost(func(r ratelimit.Request) int { costSaw = r.(*http.Request).Pattern; return 1 }),
		ratelimit.WithLimitsFunc(func(r ratelimit.Request) []ratelimit.Limit { limitsSaw = r.(*http.Request).Pattern; return nil }))
	mux := http.NewServeMux()
	mux.HandleFunc("/", adaptertest.OK)
	h := l.Handler(mux)
	for _, tt := range []struct{ method, path, want string }{
		{"POST", "/login", "POST /login"},
		{"GET", "/api/7", "/api/{id}"},
	} {
		costSaw, limitsSaw = "", ""
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))
		if costSaw != tt.want || limitsSaw != tt.want {
			t.Errorf("%s %s: the cost function saw %q and the limits function %q, want %q", tt.method, tt.path, costSaw, limitsSaw, tt.want)
		}
	}
	costSaw = ""
	r := httptest.NewRequest("GET", "/api/7", nil)
	r.Pattern = "GET /api/{id}"
	l.Handler(http.HandlerFunc(adaptertest.OK)).ServeHTTP(httptest.NewRecorder(), r)
	if costSaw != "GET /api/{id}" {
		t.Errorf("with the router's pattern known, the cost function saw %q, want it", costSaw)
	}
}

// plans is a limits function: keys beginning with "pro-" get 3 a minute,
// others 1, both fixed windows, so that a plan change keeps the count.
func plans(r ratelimit.Request) []ratelimit.Limit {
	if strings.HasPrefix(r.(*http.Request).Header.Get("X-API-Key"), "pro-") {
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
	none := func(r ratelimit.Request) []ratelimit.Limit {
		if r.(*http.Request).Header.Get("X-Plan") == "" {
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

// countingStore counts the calls that reach it: Allow's, and End's.
type countingStore struct {
	ratelimit.Store
	calls atomic.Int64
	ends  atomic.Int64
}

func (s *countingStore) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, d ratelimit.Decision) (ratelimit.Decision, error) {
	s.ends.Add(1)
	return s.Store.End(ctx, key, usage, limits, d)
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
				ratelimit.WithLimitsFunc(func(ratelimit.Request) []ratelimit.Limit { return tt.limits }),
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
	l := newLimiter(t, newMemory(t), "bounded", ratelimit.WithLimitsFunc(func(ratelimit.Request) []ratelimit.Limit {
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
func newMemory(t testing.TB) ratelimit.Store {
	t.Helper()
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCountOnlyHeadersAsSent: with WithCountOnly, a counted response's
// headers, read off the wire of a real server, say what remains after it
// and an uncounted one what remains with nothing spent; on a real Redis
// behind a Fallback, as in production, and on the Memory store.
func TestCountOnlyHeadersAsSent(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	fallback, err := store.NewFallback(newRedisStore(t, c, prefix), steadyFallback)
	if err != nil {
		t.Fatalf("NewFallback: %v", err)
	}
	t.Cleanup(func() { fallback.Close() })
	for name, s := range map[string]ratelimit.Store{"redis in a fallback": fallback, "memory": newMemory(t)} {
		t.Run(name, func(t *testing.T) {
			var seen counts
			l := newLimiter(t, s, "countonly", ratelimit.WithCountOnly(nil), ratelimit.WithObserver(seen.observe),
				ratelimit.WithLimits(ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("login")))
			srv := httptest.NewServer(l.Handler(http.HandlerFunc(adaptertest.OK)))
			t.Cleanup(srv.Close)
			for i, st := range []struct {
				fail   bool
				status int
				r      string
			}{{true, 401, "2"}, {false, 200, "2"}, {true, 401, "1"}, {true, 401, "0"}, {true, 429, "0"}, {false, 429, "0"}} {
				req, _ := http.NewRequest("GET", srv.URL, nil)
				if st.fail {
					req.Header.Set("X-Fail", "1")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				got, want := resp.Header.Get("RateLimit"), `"login";r=`+st.r+`;t=`
				secs, err := strconv.Atoi(strings.TrimPrefix(got, want)) // the window's end, whenever it opened
				if resp.StatusCode != st.status || resp.Header.Get("X-RateLimit-Remaining") != st.r || !strings.HasPrefix(got, want) || err != nil || secs < 1 || secs > 60 {
					t.Errorf("request %d: got %d, X-RateLimit-Remaining %q, RateLimit %q; want %d, %q, %q and 1 to 60 seconds",
						i, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), got, st.status, st.r, want)
				}
			}
			if seen.fallback != 0 {
				t.Errorf("%d decisions were made in process on a running Redis", seen.fallback)
			}
		})
	}
}
