// Package ratelimitotel reports what a [ratelimit.Limiter] decides, and
// the state of a [store.Fallback], to OpenTelemetry: metrics through a
// meter, and an event on the request's active span when a request is
// denied. It is a module of its own, so that the rate limiter itself never
// depends on OpenTelemetry; it pairs with the ratelimit module of the same
// repository revision.
//
//	o, err := ratelimitotel.New(otel.GetMeterProvider())
//	limiter, err := ratelimit.New(s, "api", ratelimit.WithRoutes(routes), ratelimit.WithObserver(o.Observe))
//	err = o.WatchFallback("redis", fallback)
//
// Attribute values are the Limiters' configuration only, never a key, an
// address or an API key. docs/observability.md lists the instruments,
// their attributes, and the span event "ratelimit.denied" of a denial.
package ratelimitotel

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/store"
)

const scope = "github.com/ratelimit-go/ratelimit/extra/ratelimitotel"

// MaxSeries bounds the attribute sets kept per instrument: past it, a new
// route or limit name is recorded as "other" (see the Prometheus module's
// MaxSeries for why).
const MaxSeries = 10_000

const other = "other"

const (
	keyNamespace = attribute.Key("ratelimit.namespace")
	keyRoute     = attribute.Key("http.route")
	keyOutcome   = attribute.Key("ratelimit.outcome")
	keyLimit     = attribute.Key("ratelimit.limit")
	keyStore     = attribute.Key("ratelimit.store")
	keyTo        = attribute.Key("ratelimit.fallback.to")
)

// Observer records the decisions of the Limiters it observes (pass
// [Observer.Observe] to [ratelimit.WithObserver]) with one meter. Build it
// with [New]; it is safe for concurrent use.
type Observer struct {
	meter    metric.Meter
	requests metric.Int64Counter
	limits   metric.Int64Counter
	local    metric.Int64Counter
	usage    metric.Int64Counter
	refills  metric.Int64Counter
	latency  metric.Float64Histogram

	sets *bounded.Map[labels, options] // attribute sets, made once each
}

// options hold an attribute set as the option slices the instruments
// take: passed with ..., a slice made once costs no allocation per call.
type options struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// labels are an attribute set's values; kind tells the instruments apart.
type labels struct {
	kind                    uint8
	namespace, route, limit string
	outcome                 string
}

const (
	requestKind = iota
	limitKind
	routeKind
	namespaceKind
	refillKind
)

// New returns an Observer whose instruments come from mp's meter for this package.
func New(mp metric.MeterProvider) (*Observer, error) {
	m := mp.Meter(scope)
	o := &Observer{meter: m, sets: &bounded.Map[labels, options]{Max: MaxSeries, Make: makeOptions, Overflow: overflow}}
	for _, c := range []struct {
		counter                 *metric.Int64Counter
		name, unit, description string
	}{
		{&o.requests, "ratelimit.requests", "{request}", "Requests a rate limiter decided or could not decide, by namespace, route pattern and outcome."},
		{&o.limits, "ratelimit.limit.decisions", "{decision}", "Each limit's verdict on the requests it applied to: allowed, denied, would_deny (a shadow limit) or banned."},
		{&o.local, "ratelimit.fallback.decisions", "{request}", "Requests decided in process by a Fallback while Redis was unavailable."},
		{&o.usage, "ratelimit.usage.charged", "{unit}", "Units of usage charged to limits charged from usage once responses were done, by namespace and route pattern."},
		{&o.refills, "ratelimit.lease.refills", "{refill}", "Slices of leased limits an instance took from the store, by namespace, route pattern and limit name."},
	} {
		counter, err := m.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.description))
		if err != nil {
			return nil, err
		}
		*c.counter = counter
	}
	var err error
	if o.latency, err = m.Float64Histogram("ratelimit.store.duration", metric.WithUnit("s"),
		metric.WithDescription("How long the store took to decide a request, or to fail."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)); err != nil {
		return nil, err
	}
	return o, nil
}

// Observe records e, and adds the "ratelimit.denied" event to the
// request's span when e is a denial. Pass it to [ratelimit.WithObserver].
func (o *Observer) Observe(r ratelimit.Request, e ratelimit.Event) {
	ctx := r.Context()
	if e.Outcome == "changed" { // an operator's change, not a request
		return
	}
	if e.Latency > 0 {
		o.latency.Record(ctx, e.Latency.Seconds(), o.sets.Get(labels{kind: namespaceKind, namespace: e.Namespace}).record...)
	}
	if e.Outcome == "charged" { // a request's usage, not a decision
		o.usage.Add(ctx, int64(e.Cost), o.sets.Get(labels{kind: routeKind, namespace: e.Namespace, route: e.Route}).add...)
		return
	}
	o.requests.Add(ctx, 1, o.sets.Get(labels{kind: requestKind, namespace: e.Namespace, route: e.Route, outcome: e.Outcome}).add...)
	if e.Decision.Fallback {
		o.local.Add(ctx, 1, o.sets.Get(labels{kind: routeKind, namespace: e.Namespace, route: e.Route}).add...)
	}
	for _, res := range e.Decision.Results() {
		out := e.Outcome
		if res.Allowed {
			out = "allowed"
		}
		o.limits.Add(ctx, 1, o.sets.Get(labels{kind: limitKind, namespace: e.Namespace, route: e.Route, limit: res.Limit.Name, outcome: out}).add...)
		if res.Leased > 0 {
			o.refills.Add(ctx, 1, o.sets.Get(labels{kind: refillKind, namespace: e.Namespace, route: e.Route, limit: res.Limit.Name}).add...)
		}
	}
	switch e.Outcome {
	case "denied", "banned", "would_deny":
		denied(ctx, e)
	}
}

// denied adds the "ratelimit.denied" event to ctx's span, if it records.
func denied(ctx context.Context, e ratelimit.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	var names []string
	for _, res := range e.Decision.Results() {
		if !res.Allowed {
			names = append(names, res.Limit.Name)
		}
	}
	span.AddEvent("ratelimit.denied", trace.WithAttributes(
		keyNamespace.String(e.Namespace),
		keyRoute.String(e.Route),
		keyOutcome.String(e.Outcome),
		attribute.Key("ratelimit.limits").String(strings.Join(names, ",")),
		attribute.Key("ratelimit.retry_after").Float64(e.Decision.RetryAfter.Seconds()),
	))
}

// overflow is l once MaxSeries is reached: its route and limit "other".
func overflow(l labels) labels {
	if l.route != "" {
		l.route = other
	}
	if l.limit != "" {
		l.limit = other
	}
	return l
}

// makeOptions returns the attribute set of l as instrument options.
func makeOptions(l labels) options {
	attrs := []attribute.KeyValue{keyNamespace.String(l.namespace)}
	switch l.kind {
	case requestKind:
		attrs = append(attrs, keyRoute.String(l.route), keyOutcome.String(l.outcome))
	case limitKind:
		attrs = append(attrs, keyRoute.String(l.route), keyLimit.String(l.limit), keyOutcome.String(l.outcome))
	case refillKind:
		attrs = append(attrs, keyRoute.String(l.route), keyLimit.String(l.limit))
	case routeKind:
		attrs = append(attrs, keyRoute.String(l.route))
	}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return options{add: []metric.AddOption{set}, record: []metric.RecordOption{set}}
}

// WatchFallback reports f's state under ratelimit.store=name at every
// collection: ratelimit.fallback.active, ratelimit.fallback.transitions
// and ratelimit.fallback.waiting (see docs/observability.md).
func (o *Observer) WatchFallback(name string, f *store.Fallback) error {
	active, err := o.meter.Int64ObservableGauge("ratelimit.fallback.active", metric.WithUnit("1"),
		metric.WithDescription("1 while the Fallback decides in process because Redis is unavailable, 0 while Redis decides."))
	if err != nil {
		return err
	}
	moves, err := o.meter.Int64ObservableCounter("ratelimit.fallback.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Times decisions moved to in_process when Redis failed, and back to redis when it came back."))
	if err != nil {
		return err
	}
	waiting, err := o.meter.Int64ObservableGauge("ratelimit.fallback.waiting", metric.WithUnit("{key}"),
		metric.WithDescription("Keys decided in process because what was decided for them in process has yet to reach Redis; 0 once every key is back on Redis."))
	if err != nil {
		return err
	}
	storeSet := metric.WithAttributeSet(attribute.NewSet(keyStore.String(name)))
	down := metric.WithAttributeSet(attribute.NewSet(keyStore.String(name), keyTo.String("in_process")))
	up := metric.WithAttributeSet(attribute.NewSet(keyStore.String(name), keyTo.String("redis")))
	_, err = o.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		h := f.Health()
		var a int64
		if h.Decisions != "redis" {
			a = 1
		}
		obs.ObserveInt64(active, a, storeSet)
		obs.ObserveInt64(moves, int64(h.Outages), down)
		obs.ObserveInt64(moves, int64(h.Recoveries), up)
		obs.ObserveInt64(waiting, h.Waiting, storeSet)
		return nil
	}, active, moves, waiting)
	return err
}
