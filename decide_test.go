package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/store"
)

// Work outside any transport, decided by key with Limiter.Decide, gets
// every feature of a Limiter: the route's limits, plans, overrides,
// Shadow limits, bans, slots given back and usage charged at the end,
// the observer; on the Memory store and on a real redis-server alike.

// decideStores are the stores the Decide tests run on.
func decideStores(t *testing.T) map[string]ratelimit.Store {
	t.Helper()
	c, prefix := sharedRedis(t)
	c2, prefix2 := sharedRedis(t)
	f, err := store.NewFallback(newRedisStore(t, c2, prefix2), store.FallbackOptions{Budget: time.Second, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return map[string]ratelimit.Store{"memory": newMemory(t), "redis": newRedisStore(t, c, prefix), "fallback": f}
}

// outcomes records the observer's outcomes, by route.
type outcomes struct {
	mu   sync.Mutex
	seen []string
}

func (o *outcomes) observe(r ratelimit.Request, e ratelimit.Event) {
	if _, ok := r.(*http.Request); ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, e.Route+" "+e.Outcome)
}

func (o *outcomes) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := o.seen
	o.seen = nil
	return seen
}

// TestDecideByKey: a route's limits and its slot, a plan for one tenant,
// usage charged at the end, a ban, all by key, observed.
func TestDecideByKey(t *testing.T) {
	for name, s := range decideStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var seen outcomes
			l, err := ratelimit.New(s, "jobs-"+name,
				ratelimit.WithRoutes(map[string][]ratelimit.Limit{
					"/resize": {
						ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("jobs"),
						{Algorithm: ratelimit.Concurrent, Quota: 1, Name: "running"},
						{Quota: 100, Window: time.Minute, Usage: true, Name: "pixels"},
					},
				}),
				ratelimit.WithLimitsFunc(func(r ratelimit.Request) []ratelimit.Limit {
					if r.Context().Value(tenantCtx{}) == "acme" {
						return []ratelimit.Limit{ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("acme")}
					}
					return nil
				}),
				ratelimit.WithBan(ratelimit.Ban{After: 2, Within: time.Minute, For: 10 * time.Minute}),
				ratelimit.WithObserver(seen.observe))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			decide := func(tenant string) ratelimit.Verdict {
				return l.Decide(ratelimit.Key(context.WithValue(ctx, tenantCtx{}, tenant), "/resize", tenant, 1))
			}

			// One at a time: a second while the first runs is denied by its slot.
			first := decide("globex")
			if !first.Allowed || first.Key != "globex" || first.Err != nil {
				t.Fatalf("the first job: %+v", first)
			}
			if got := ratelimit.Decisions(first.Context); len(got) != 1 || !got[0].Allowed {
				t.Errorf("the first job's context carries %+v, want its decision", got)
			}
			second := decide("globex")
			if second.Allowed || second.RetryAfter <= 0 || deniedNames(second.Decision) != "running" {
				t.Errorf("a second job while the first runs: %+v, want denied by running", second)
			}
			if got := second.Fields.Get("Retry-After"); got == "" {
				t.Errorf("the refusal's fields %v have no Retry-After", second.Fields)
			}
			ratelimit.Charge(first.Context, 60) // pixels used
			if err := l.End(first.Context); err != nil {
				t.Fatal(err)
			}
			// The slot is back, and the usage charged: 40 pixels left, of
			// which the third reserves its cost.
			third := decide("globex")
			if !third.Allowed || remainingOf(third.Decision, "pixels") != 39 {
				t.Errorf("after the first ended: %+v, want admitted with 39 pixels left (60 used, 1 reserved)", third)
			}
			if err := l.End(third.Context); err != nil {
				t.Fatal(err)
			}
			// Peek by key reads without spending; Reset by key forgets.
			peeked, err := l.Peek(ratelimit.Key(ctx, "/resize", "globex", 1))
			if err != nil || remainingOf(peeked, "jobs") != 1 || remainingOf(peeked, "pixels") != 39 {
				t.Errorf("Peek by key: %+v %v, want 1 job left (2 of 3 admitted) and 39 pixels (60, then the third's cost)", peeked, err)
			}
			// The plan: acme's own limit, 1 a minute, then a ban after 2 denials.
			if v := decide("acme"); !v.Allowed || deniedNames(v.Decision) != "" || v.Decision.Results()[0].Limit.Name != "acme" {
				t.Errorf("acme's first job: %+v, want admitted by its plan", v)
			}
			for range 2 {
				decide("acme")
			}
			if v := decide("acme"); v.Allowed || v.Decision.Banned <= 0 {
				t.Errorf("acme after 2 denials: %+v, want banned", v)
			}
			if err := l.Reset(ratelimit.Key(ctx, "/resize", "globex", 1)); err != nil {
				t.Fatal(err)
			}
			if v := decide("globex"); !v.Allowed || remainingOf(v.Decision, "jobs") != 2 {
				t.Errorf("after Reset by key: %+v, want admitted with 2 jobs left", v)
			}
			want := []string{"/resize allowed", "/resize denied", "/resize charged", "/resize allowed", "/resize charged", "/resize allowed", "/resize denied", "/resize banned", "/resize banned", "/resize allowed"}
			if got := seen.take(); !slices.Equal(got, want) {
				t.Errorf("observed %q, want %q", got, want)
			}
		})
	}
}

type tenantCtx struct{}

// TestDecideOverridesAndShadow: an override by key, and a Shadow limit
// that would deny, by key as over HTTP.
func TestDecideOverridesAndShadow(t *testing.T) {
	table, err := override.NewTable([]override.Override{{Policy: "jobs", StoredKey: "vip", Quota: 5}, {Policy: "jobs", StoredKey: "blocked", Blocked: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range decideStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, err := ratelimit.New(s, "ov-"+name,
				ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("jobs"),
					ratelimit.Limit{Quota: 1, Window: time.Hour, Shadow: true, Name: "try"}),
				ratelimit.WithOverrides(override.Fixed(table)),
				ratelimit.WithLogger(discardLogger))
			if err != nil {
				t.Fatal(err)
			}
			decide := func(key string) ratelimit.Verdict { return l.Decide(ratelimit.Key(context.Background(), "", key, 1)) }
			for i := range 5 {
				if v := decide("vip"); !v.Allowed {
					t.Fatalf("vip's job %d: %+v, want admitted under its override of 5", i, v)
				}
			}
			if v := decide("vip"); v.Allowed {
				t.Errorf("vip's sixth job admitted, over its override of 5")
			}
			if v := decide("blocked"); v.Allowed || v.Err != nil {
				t.Errorf("a blocked key: %+v, want denied", v)
			}
			// a's second job: the shadow limit alone would deny it, and it is
			// served; its third is denied by jobs, 2 a minute.
			decide("a")
			if v := decide("a"); !v.Allowed || deniedNames(v.Decision) != "" {
				t.Errorf("a's second job: %+v, want served, the shadow limit's would-be denial apart", v)
			}
			if v := decide("a"); v.Allowed || !strings.Contains(deniedNames(v.Decision), "jobs") {
				t.Errorf("a's third job: %+v, want denied by jobs (2 a minute)", v)
			}
		})
	}
}

// TestDecideManyOverridesOfOnePolicy: more distinct overrides of one
// policy than a Limiter keeps at hand, met in turn, each key held to its
// own quota, for a policy of one limit and one of two.
func TestDecideManyOverridesOfOnePolicy(t *testing.T) {
	const keys = 24
	var list []override.Override
	for k := range keys {
		list = append(list, override.Override{Policy: "jobs", StoredKey: "k" + strconv.Itoa(k), Quota: k + 1})
	}
	table, err := override.NewTable(list)
	if err != nil {
		t.Fatal(err)
	}
	for name, limits := range map[string][]ratelimit.Limit{
		"one":     {ratelimit.PerMinute(100).Using(ratelimit.FixedWindow).Named("jobs")},
		"several": {ratelimit.PerMinute(100).Using(ratelimit.FixedWindow).Named("jobs"), ratelimit.PerMinute(1000).Named("all")},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := ratelimit.New(newMemory(t), "many-"+name, ratelimit.WithLimits(limits...),
				ratelimit.WithOverrides(override.Fixed(table)), ratelimit.WithLogger(discardLogger))
			if err != nil {
				t.Fatal(err)
			}
			admitted := make([]int, keys)
			for range keys + 2 {
				for k := range keys {
					if v := l.Decide(ratelimit.Key(context.Background(), "", "k"+strconv.Itoa(k), 1)); v.Err != nil {
						t.Fatal(v.Err)
					} else if v.Allowed {
						admitted[k]++
					}
				}
			}
			for k, n := range admitted {
				if n != k+1 {
					t.Errorf("key k%d: %d admitted, want its override's quota, %d", k, n, k+1)
				}
			}
		})
	}
}

// TestDecideOneOverrideOfTwoRoutes: an override of a policy two routes
// name alike keeps each route's own window, met in turn.
func TestDecideOneOverrideOfTwoRoutes(t *testing.T) {
	table, err := override.NewTable([]override.Override{{Policy: "jobs", StoredKey: "k", Quota: 5}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(newMemory(t), "routes", ratelimit.WithRoutes(map[string][]ratelimit.Limit{
		"/a": {ratelimit.PerMinute(100).Using(ratelimit.FixedWindow).Named("jobs")},
		"/b": {{Quota: 100, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Name: "jobs"}},
	}), ratelimit.WithOverrides(override.Fixed(table)), ratelimit.WithLogger(discardLogger))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for route, window := range map[string]time.Duration{"/a": time.Minute, "/b": time.Hour} {
			v := l.Decide(ratelimit.Key(context.Background(), route, "k", 1))
			if v.Err != nil || len(v.Decision.Results()) != 1 {
				t.Fatalf("%s: %+v", route, v)
			}
			if got := v.Decision.Results()[0].Limit; got.Quota != 5 || got.Window != window {
				t.Errorf("%s: decided under %d per %v, want the override's 5 per the route's %v", route, got.Quota, got.Window, window)
			}
		}
	}
}

// TestDecideErrors: a request that cannot be counted is refused, naming
// the field missing; a store that fails lets work through, unless the
// error handler is FailClosed, which refuses it with a second's retry.
func TestDecideErrors(t *testing.T) {
	key, err := ratelimit.HeaderKey("X-API-Key", []byte("a test secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(newMemory(t), "errs", ratelimit.WithLogger(discardLogger), ratelimit.WithKey(key), ratelimit.WithLimits(ratelimit.PerMinute(1)))
	if err != nil {
		t.Fatal(err)
	}
	v := l.Decide(request{ctx: context.Background()})
	if v.Allowed || !errors.Is(v.Err, ratelimit.ErrInvalid) || v.Missing != "X-Api-Key" {
		t.Errorf("no X-API-Key: %+v, want refused, ErrInvalid, X-Api-Key missing", v)
	}
	v = l.Decide(request{ctx: context.Background(), header: map[string][]string{"X-Api-Key": {"k1"}}})
	if !v.Allowed || v.Key == "" || v.Key == "k1" {
		t.Errorf("with X-API-Key: %+v, want admitted, counted under the key's hash", v)
	}

	for _, tt := range []struct {
		name    string
		opts    []ratelimit.Option
		allowed bool
	}{
		{"FailOpen", nil, true},
		{"FailClosed", []ratelimit.Option{ratelimit.WithErrorHandler(ratelimit.FailClosed)}, false},
	} {
		l, err := ratelimit.New(failingStore{}, "fail", append([]ratelimit.Option{ratelimit.WithLogger(discardLogger), ratelimit.WithLimits(ratelimit.PerMinute(1))}, tt.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		v := l.Decide(ratelimit.Key(context.Background(), "", "k", 1))
		if v.Allowed != tt.allowed || v.Err == nil || errors.Is(v.Err, ratelimit.ErrInvalid) {
			t.Errorf("%s: %+v, want allowed %v with the store's error", tt.name, v, tt.allowed)
		}
		if !tt.allowed && (v.RetryAfter != time.Second || v.Fields.Get("Retry-After") != "1") {
			t.Errorf("%s: retry %v, fields %v; want 1s", tt.name, v.RetryAfter, v.Fields)
		}
	}
}

// TestDecideHTTP: an *http.Request is a Request: Decide answers it as
// Allow would, writing nothing, with the fields Allow would set.
func TestDecideHTTP(t *testing.T) {
	l, err := ratelimit.New(newMemory(t), "web", ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("api")))
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	v := l.Decide(r)
	if !v.Allowed || v.Fields.Get("RateLimit") != `"api";r=0;t=60` || v.Key != "ip:192.0.2.1" {
		t.Errorf("the first: %+v, want admitted, RateLimit \"api\";r=0;t=60, keyed by the peer", v)
	}
	if got := ratelimit.Decisions(v.Context); len(got) != 1 {
		t.Errorf("the verdict's context carries %d decisions, want 1", len(got))
	}
	w := httptest.NewRecorder()
	if _, ok := l.Allow(w, httptest.NewRequest("GET", "/", nil)); ok || w.Code != 429 {
		t.Errorf("Allow after Decide: %v %d, want 429: Decide counted", ok, w.Code)
	}
}

// request is a Request of a transport of a test's own: a context and
// a header.
type request struct {
	ctx    context.Context
	header map[string][]string
}

func (r request) Context() context.Context    { return r.ctx }
func (r request) Header(name string) []string { return r.header[name] }

// failingStore fails every call.
type failingStore struct{ ratelimit.Store }

func (failingStore) Allow(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("the store is down")
}

// deniedNames returns the names of the limits that denied d, joined.
func deniedNames(d ratelimit.Decision) string {
	var names []string
	for _, r := range d.Results() {
		if !r.Allowed {
			names = append(names, r.Limit.Name)
		}
	}
	return strings.Join(names, ",")
}

// remainingOf returns what d says is left of the limit named name, -1
// when it has no such limit.
func remainingOf(d ratelimit.Decision, name string) int {
	for _, r := range d.Results() {
		if r.Limit.Name == name {
			return r.Remaining
		}
	}
	return -1
}
