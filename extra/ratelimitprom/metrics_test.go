package ratelimitprom_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/extra/ratelimitprom"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// serveKnownSequence sends requests through two Limiters observed by m,
// on a Memory store: three logins to a route of two limits (2 a minute
// and a burst of 100), of which the third is denied, and three requests
// to a Limiter of 100 a minute beside a shadow limit of 1, which would
// deny two of them, and
// two requests using 30 and 12 units of a limit charged from usage.
func serveKnownSequence(t *testing.T, m *ratelimitprom.Metrics) {
	t.Helper()
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	login, err := ratelimit.New(s, "auth",
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
			"POST /login": {
				ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("login"),
				ratelimit.PerSecond(100).Using(ratelimit.TokenBucket).Named("burst"),
			},
		}),
		ratelimit.WithObserver(m.Observe))
	if err != nil {
		t.Fatal(err)
	}
	trial, err := ratelimit.New(s, "api",
		ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Quota: 1, Window: time.Minute, Shadow: true, Name: "new-limit"}, ratelimit.PerMinute(100).Named("rpm")),
		ratelimit.WithDryRun(func(ratelimit.Request, ratelimit.Decision) {}), // where the shadow limit's would-be denials go
		ratelimit.WithObserver(m.Observe))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := ratelimit.New(s, "gen",
		ratelimit.WithLimits(ratelimit.Limit{Quota: 1000, Window: time.Minute, Usage: true, Name: "tokens"}),
		ratelimit.WithObserver(m.Observe))
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for range 3 {
		login.Handler(ok).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/login", nil))
	}
	for range 3 {
		trial.Handler(ok).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/items", nil))
	}
	for _, used := range []int{30, 12} {
		gen.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			ratelimit.Charge(r.Context(), used)
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/generate", nil))
	}
}

func TestMetricsAfterKnownSequence(t *testing.T) {
	m := ratelimitprom.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	serveKnownSequence(t, m)

	want := `
# HELP ratelimit_requests_total Requests a rate limiter decided or could not decide, by namespace, route pattern and outcome.
# TYPE ratelimit_requests_total counter
ratelimit_requests_total{namespace="api",outcome="allowed",route=""} 1
ratelimit_requests_total{namespace="api",outcome="would_deny",route=""} 2
ratelimit_requests_total{namespace="auth",outcome="allowed",route="POST /login"} 2
ratelimit_requests_total{namespace="auth",outcome="denied",route="POST /login"} 1
ratelimit_requests_total{namespace="gen",outcome="allowed",route=""} 2
# HELP ratelimit_limit_decisions_total Each limit's verdict on the requests it applied to, by namespace, route pattern, limit name and outcome (allowed, denied, would_deny by a shadow limit, banned).
# TYPE ratelimit_limit_decisions_total counter
ratelimit_limit_decisions_total{limit="burst",namespace="auth",outcome="allowed",route="POST /login"} 3
ratelimit_limit_decisions_total{limit="login",namespace="auth",outcome="allowed",route="POST /login"} 2
ratelimit_limit_decisions_total{limit="login",namespace="auth",outcome="denied",route="POST /login"} 1
ratelimit_limit_decisions_total{limit="new-limit",namespace="api",outcome="allowed",route=""} 1
ratelimit_limit_decisions_total{limit="new-limit",namespace="api",outcome="would_deny",route=""} 2
ratelimit_limit_decisions_total{limit="rpm",namespace="api",outcome="allowed",route=""} 3
ratelimit_limit_decisions_total{limit="tokens",namespace="gen",outcome="allowed",route=""} 2
# HELP ratelimit_usage_charged_total Units of usage charged to limits charged from usage once responses were done, by namespace and route pattern.
# TYPE ratelimit_usage_charged_total counter
ratelimit_usage_charged_total{namespace="gen",route=""} 42
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ratelimit_requests_total", "ratelimit_limit_decisions_total", "ratelimit_usage_charged_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "ratelimit_store_duration_seconds"); n != 3 {
		t.Errorf("got %d latency histograms, want one per namespace: 3", n)
	}
	if n := testutil.CollectAndCount(m, "ratelimit_fallback_decisions_total"); n != 0 {
		t.Errorf("got %d series of fallback decisions, want none without a Fallback", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestFallbackMetrics watches a Fallback on a real redis-server through
// a kill: the gauge goes to 1, the transition and the errors are counted,
// decisions made in process are counted by route, and the last change's
// time moves.
func TestFallbackMetrics(t *testing.T) {
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	r, err := store.NewRedis(client, store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := store.NewFallback(r, store.FallbackOptions{Budget: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m := ratelimitprom.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.WatchFallback("redis", f)
	l, err := ratelimit.New(f, "api", ratelimit.WithLimits(ratelimit.PerMinute(10).Named("api")), ratelimit.WithObserver(m.Observe), ratelimit.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	before := testutil.ToFloat64(gaugeOf(t, reg, "ratelimit_fallback_last_change_timestamp_seconds"))
	if testutil.ToFloat64(gaugeOf(t, reg, "ratelimit_fallback_active")) != 0 {
		t.Fatal("ratelimit_fallback_active is 1 while Redis decides")
	}
	srv.Kill()
	for range 2 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	want := `
# HELP ratelimit_fallback_active 1 while the Fallback decides in process because Redis is unavailable, 0 while Redis decides.
# TYPE ratelimit_fallback_active gauge
ratelimit_fallback_active{store="redis"} 1
# HELP ratelimit_fallback_transitions_total Times decisions moved: to="in_process" when Redis failed, to="redis" when it came back.
# TYPE ratelimit_fallback_transitions_total counter
ratelimit_fallback_transitions_total{store="redis",to="in_process"} 1
ratelimit_fallback_transitions_total{store="redis",to="redis"} 0
# HELP ratelimit_fallback_redis_errors_total Redis calls that failed or overran the budget, by kind: outage (it may pass) or misconfigured (someone must fix the setup).
# TYPE ratelimit_fallback_redis_errors_total counter
ratelimit_fallback_redis_errors_total{kind="misconfigured",store="redis"} 0
ratelimit_fallback_redis_errors_total{kind="outage",store="redis"} 1
# HELP ratelimit_fallback_local_decisions_total Decisions the Fallback made in process.
# TYPE ratelimit_fallback_local_decisions_total counter
ratelimit_fallback_local_decisions_total{store="redis"} 2
# HELP ratelimit_fallback_decisions_total Requests decided in process by a Fallback while Redis was unavailable, by namespace and route pattern.
# TYPE ratelimit_fallback_decisions_total counter
ratelimit_fallback_decisions_total{namespace="api",route=""} 2
# HELP ratelimit_fallback_waiting_keys Keys decided in process because what was decided for them in process has yet to reach Redis; 0 once every key is back on Redis.
# TYPE ratelimit_fallback_waiting_keys gauge
ratelimit_fallback_waiting_keys{store="redis"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ratelimit_fallback_active", "ratelimit_fallback_transitions_total",
		"ratelimit_fallback_redis_errors_total", "ratelimit_fallback_local_decisions_total", "ratelimit_fallback_decisions_total", "ratelimit_fallback_waiting_keys"); err != nil {
		t.Error(err)
	}
	if after := testutil.ToFloat64(gaugeOf(t, reg, "ratelimit_fallback_last_change_timestamp_seconds")); after <= before {
		t.Errorf("last change at %v after the outage, %v before: want later", after, before)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// gaugeOf returns a collector of the single series of the metric name
// that reg gathers.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: "copy"}, func() float64 { return mf.GetMetric()[0].GetGauge().GetValue() })
		}
	}
	t.Fatalf("%s: not one series gathered", name)
	return nil
}

var quiet = slog.New(slog.DiscardHandler)

// TestLeaseRefills: a leased hot key on a real redis-server, 18 requests:
// the first takes a slice of 16 beyond its cost, the next 16 spend it,
// the 18th takes another: two refills.
func TestLeaseRefills(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr})
	t.Cleanup(func() { client.Close() })
	s, err := store.NewRedis(client, store.RedisOptions{Prefix: "prom-lease:"})
	if err != nil {
		t.Fatal(err)
	}
	m := ratelimitprom.New()
	everyone := func(ratelimit.Request) (string, error) { return "everyone", nil }
	l, err := ratelimit.New(s, "api", ratelimit.WithKey(everyone), ratelimit.WithObserver(m.Observe),
		ratelimit.WithLimits(ratelimit.Limit{Quota: 10_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true, Name: "hot"}))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 18 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	want := `
# HELP ratelimit_lease_refills_total Slices of leased limits this instance took from the store, by namespace, route pattern and limit name.
# TYPE ratelimit_lease_refills_total counter
ratelimit_lease_refills_total{limit="hot",namespace="api",route=""} 2
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "ratelimit_lease_refills_total"); err != nil {
		t.Error(err)
	}
}

// TestChangesAreNotCounted: an operator's change (the outcome "changed")
// is no request: it adds no series.
func TestChangesAreNotCounted(t *testing.T) {
	m := ratelimitprom.New()
	m.Observe(httptest.NewRequest("PUT", "/admin/overrides", nil), ratelimit.Event{Namespace: "api", Outcome: "changed", Who: "ops", What: "override api \"k\""})
	for _, name := range []string{"ratelimit_requests_total", "ratelimit_limit_decisions_total", "ratelimit_usage_charged_total"} {
		if n := testutil.CollectAndCount(m, name); n != 0 {
			t.Errorf("a change made %d series of %s", n, name)
		}
	}
}
