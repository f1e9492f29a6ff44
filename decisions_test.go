package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
)

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
	skipped := newLimiter(t, mem, "skipped", ratelimit.WithLimits(ratelimit.PerMinute(1)), ratelimit.WithSkip(func(*http.Request) bool { return true }))
	routed := newLimiter(t, mem, "routed", ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(1)}}))
	failed := newLimiter(t, adaptertest.Down{}, "failed", ratelimit.WithLogger(discardLogger), ratelimit.WithLimits(ratelimit.PerMinute(1)))
	dry := newLimiter(t, mem, "dry", ratelimit.WithLimits(ratelimit.PerMinute(1).Named("dry")), ratelimit.WithDryRun(func(*http.Request, ratelimit.Decision) {}))
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
		ratelimit.WithCost(func(r *http.Request) int { costSaw = r.Pattern; return 1 }),
		ratelimit.WithLimitsFunc(func(r *http.Request) []ratelimit.Limit { limitsSaw = r.Pattern; return nil }))
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
