package ratelimitotel_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/extra/ratelimitotel"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var quiet = slog.New(slog.DiscardHandler)

// setup returns an Observer on a manual reader, and a tracer provider
// recording into the returned recorder.
func setup(t *testing.T) (*ratelimitotel.Observer, *sdkmetric.ManualReader, *sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	o, err := ratelimitotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	return o, reader, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// TestObserver sends three logins, the third denied, each in a span of
// its own, and checks the counters, the latency histogram and the span
// event of the denial.
func TestObserver(t *testing.T) {
	o, reader, tp, rec := setup(t)
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(s, "auth", ratelimit.WithRoutes(map[string][]ratelimit.Limit{
		"POST /login": {
			ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("login"),
			ratelimit.PerSecond(100).Using(ratelimit.TokenBucket).Named("burst"),
		},
	}), ratelimit.WithObserver(o.Observe))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		ctx, span := tp.Tracer("test").Start(context.Background(), "POST /login")
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/login", nil).WithContext(ctx))
		span.End()
	}

	got := collect(t, reader)
	route := attribute.String("http.route", "POST /login")
	ns := attribute.String("ratelimit.namespace", "auth")
	for _, tt := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{"ratelimit.requests", []attribute.KeyValue{ns, route, attribute.String("ratelimit.outcome", "allowed")}, 2},
		{"ratelimit.requests", []attribute.KeyValue{ns, route, attribute.String("ratelimit.outcome", "denied")}, 1},
		{"ratelimit.limit.decisions", []attribute.KeyValue{ns, route, attribute.String("ratelimit.limit", "login"), attribute.String("ratelimit.outcome", "denied")}, 1},
		{"ratelimit.limit.decisions", []attribute.KeyValue{ns, route, attribute.String("ratelimit.limit", "burst"), attribute.String("ratelimit.outcome", "allowed")}, 3},
	} {
		if v := value(got, tt.name, attribute.NewSet(tt.attrs...)); v != tt.want {
			t.Errorf("%s%v: got %d, want %d", tt.name, tt.attrs, v, tt.want)
		}
	}
	if n := histogramCount(got, "ratelimit.store.duration", attribute.NewSet(ns)); n != 3 {
		t.Errorf("ratelimit.store.duration: %d observations, want 3", n)
	}

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3", len(spans))
	}
	for i, sp := range spans {
		events := sp.Events()
		if i < 2 {
			if len(events) != 0 {
				t.Errorf("span %d, allowed: got events %v, want none", i, events)
			}
			continue
		}
		if len(events) != 1 || events[0].Name != "ratelimit.denied" {
			t.Fatalf("span %d, denied: got events %v, want ratelimit.denied", i, events)
		}
		attrs := attribute.NewSet(events[0].Attributes...)
		for k, want := range map[attribute.Key]string{"ratelimit.namespace": "auth", "http.route": "POST /login", "ratelimit.outcome": "denied", "ratelimit.limits": "login"} {
			if v, ok := attrs.Value(k); !ok || v.AsString() != want {
				t.Errorf("event attribute %s: got %v, want %q", k, v.String(), want)
			}
		}
		if v, ok := attrs.Value("ratelimit.retry_after"); !ok || v.AsFloat64() <= 0 || v.AsFloat64() > 60 {
			t.Errorf("event attribute ratelimit.retry_after: got %v, want a time within the minute", v.String())
		}
	}
}

// TestObserverUsage: the usage charged once responses are done is added
// up by namespace and route, apart from the requests.
func TestObserverUsage(t *testing.T) {
	o, reader, _, _ := setup(t)
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(s, "gen", ratelimit.WithLimits(ratelimit.Limit{Quota: 1000, Window: time.Minute, Usage: true, Name: "tokens"}),
		ratelimit.WithObserver(o.Observe))
	if err != nil {
		t.Fatal(err)
	}
	for _, used := range []int{30, 12} {
		l.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			ratelimit.Charge(r.Context(), used)
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/generate", nil))
	}
	got := collect(t, reader)
	ns := attribute.String("ratelimit.namespace", "gen")
	route := attribute.String("http.route", "")
	if v := value(got, "ratelimit.usage.charged", attribute.NewSet(ns, route)); v != 42 {
		t.Errorf("ratelimit.usage.charged: got %d, want 42", v)
	}
	if v := value(got, "ratelimit.requests", attribute.NewSet(ns, route, attribute.String("ratelimit.outcome", "allowed"))); v != 2 {
		t.Errorf("ratelimit.requests allowed: got %d, want 2: a charge is no request", v)
	}
}

// TestWatchFallback follows a Fallback on a real redis-server through a
// kill: the gauge goes from 0 to 1 and the move is counted, and the
// decisions made in process are counted by route.
func TestWatchFallback(t *testing.T) {
	o, reader, _, _ := setup(t)
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
	if err := o.WatchFallback("redis", f); err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(f, "api", ratelimit.WithLimits(ratelimit.PerMinute(10)), ratelimit.WithObserver(o.Observe), ratelimit.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	storeAttr := attribute.NewSet(attribute.String("ratelimit.store", "redis"))
	if v := value(collect(t, reader), "ratelimit.fallback.active", storeAttr); v != 0 {
		t.Fatalf("ratelimit.fallback.active = %d on a running Redis, want 0", v)
	}
	srv.Kill()
	for range 2 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	got := collect(t, reader)
	if v := value(got, "ratelimit.fallback.active", storeAttr); v != 1 {
		t.Errorf("ratelimit.fallback.active = %d with Redis killed, want 1", v)
	}
	if v := value(got, "ratelimit.fallback.waiting", storeAttr); v != 1 {
		t.Errorf("ratelimit.fallback.waiting = %d with Redis killed, after requests of one key, want 1", v)
	}
	if v := value(got, "ratelimit.fallback.transitions", attribute.NewSet(attribute.String("ratelimit.store", "redis"), attribute.String("ratelimit.fallback.to", "in_process"))); v != 1 {
		t.Errorf("ratelimit.fallback.transitions to in_process = %d, want 1", v)
	}
	if v := value(got, "ratelimit.fallback.decisions", attribute.NewSet(attribute.String("ratelimit.namespace", "api"), attribute.String("http.route", ""))); v != 2 {
		t.Errorf("ratelimit.fallback.decisions = %d, want 2", v)
	}
}

// TestObserveAllocations: once its attribute sets exist, recording a
// request, allowed or denied, costs the request no allocation; the span
// event of a denial is added only to a span that records.
func TestObserveAllocations(t *testing.T) {
	o, _, _, _ := setup(t)
	for _, quota := range []int{1 << 30, 1} {
		allocs := func(opts ...ratelimit.Option) float64 {
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l, err := ratelimit.New(s, "api", append(opts, ratelimit.WithLimits(ratelimit.Limit{Quota: quota, Window: time.Hour}.Named("api")))...)
			if err != nil {
				t.Fatal(err)
			}
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest("GET", "/", nil)
			h.ServeHTTP(httptest.NewRecorder(), r)
			return testing.AllocsPerRun(100, func() { h.ServeHTTP(&discard{header: http.Header{}}, r) })
		}
		if with, without := allocs(ratelimit.WithObserver(o.Observe)), allocs(); with != without {
			t.Errorf("quota %d: %v allocations per request with the observer, %v without", quota, with, without)
		}
	}
}

type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

func collect(t *testing.T, reader *sdkmetric.ManualReader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// value returns the int64 value of name's data point with attrs, a
// counter's or a gauge's, or -1.
func value(rm metricdata.ResourceMetrics, name string, attrs attribute.Set) int64 {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			}
			for _, dp := range points {
				if dp.Attributes.Equals(&attrs) {
					return dp.Value
				}
			}
		}
	}
	return -1
}

// histogramCount returns the count of name's data point with attrs, or 0.
func histogramCount(rm metricdata.ResourceMetrics, name string, attrs attribute.Set) uint64 {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, dp := range h.DataPoints {
					if dp.Attributes.Equals(&attrs) {
						return dp.Count
					}
				}
			}
		}
	}
	return 0
}

// TestObserverLeaseRefills: a leased hot key on a real redis-server, 18
// requests: the first takes a slice of 16 beyond its cost, the next 16
// spend it, the 18th takes another: two refills.
func TestObserverLeaseRefills(t *testing.T) {
	o, reader, _, _ := setup(t)
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr})
	t.Cleanup(func() { client.Close() })
	s, err := store.NewRedis(client, store.RedisOptions{Prefix: "otel-lease:"})
	if err != nil {
		t.Fatal(err)
	}
	everyone := func(ratelimit.Request) (string, error) { return "everyone", nil }
	l, err := ratelimit.New(s, "api", ratelimit.WithKey(everyone), ratelimit.WithObserver(o.Observe),
		ratelimit.WithLimits(ratelimit.Limit{Quota: 10_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true, Name: "hot"}))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 18 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	attrs := attribute.NewSet(attribute.String("ratelimit.namespace", "api"), attribute.String("http.route", ""), attribute.String("ratelimit.limit", "hot"))
	if v := value(collect(t, reader), "ratelimit.lease.refills", attrs); v != 2 {
		t.Errorf("ratelimit.lease.refills: got %d, want 2", v)
	}
}

// TestChangesAreNotCounted: an operator's change (the outcome "changed")
// is no request: it adds no data point.
func TestChangesAreNotCounted(t *testing.T) {
	o, reader, _, _ := setup(t)
	o.Observe(httptest.NewRequest("PUT", "/admin/overrides", nil), ratelimit.Event{Namespace: "api", Outcome: "changed", Who: "ops", What: "override api \"k\""})
	for _, sm := range collect(t, reader).ScopeMetrics {
		for _, m := range sm.Metrics {
			t.Errorf("a change made the metric %s", m.Name)
		}
	}
}
