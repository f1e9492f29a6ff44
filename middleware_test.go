package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
	"github.com/ratelimit-go/ratelimit/store"
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

	costly := newLimiter(t, m, "costly", ratelimit.WithLimits(login), ratelimit.WithCost(func(*http.Request) int { return 2 }))
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
		ratelimit.WithDryRun(func(r *http.Request, d ratelimit.Decision) { reported = append(reported, d) }))
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

// failing is a store whose error text must never reach a client.
type failing struct{ err error }

func (f failing) Allow(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, f.err
}

func (f failing) Peek(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, f.err
}

func (f failing) Reset(context.Context, string, *ratelimit.Limits) error { return f.err }

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
	raw := func(r *http.Request) (string, error) {
		if v := r.Header.Get("X-Key"); v != "" {
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
// of its limits; a cost outside 1 to that is the client's fault (400), not
// a denial and not a store failure.
func TestCostAgainstCapacity(t *testing.T) {
	limits := ratelimit.WithLimits(
		ratelimit.PerSecond(10), ratelimit.PerMinute(100), ratelimit.PerMinute(100).Using(ratelimit.FixedWindow),
		ratelimit.PerMinute(5).Using(ratelimit.TokenBucket), ratelimit.PerMinute(6).Using(ratelimit.TokenBucket))
	cost := ratelimit.WithCost(func(r *http.Request) int {
		n, _ := strconv.Atoi(r.Header.Get("X-Cost"))
		return n
	})
	tests := []struct {
		cost   int
		status int
	}{
		{1, 200},
		{5, 200}, // the smallest capacity, 5 tokens
		{6, 400},
		{0, 400},
		{-1, 400},
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
			if tt.status == 400 && (seen.of("bad_request") != 1 || seen.of("store_error") != 0) {
				t.Errorf("observed %v, want one bad request and no store error", seen.by)
			}
		})
	}
}
