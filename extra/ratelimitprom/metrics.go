// Package ratelimitprom exports what a [ratelimit.Limiter] decides, and
// the state of a [store.Fallback], as Prometheus metrics. It is a module of
// its own, so that the rate limiter itself never depends on
// client_golang; it pairs with the ratelimit module of the same
// repository revision.
//
//	m := ratelimitprom.New()
//	prometheus.MustRegister(m)
//	limiter, err := ratelimit.New(s, "api", ratelimit.WithRoutes(routes), ratelimit.WithObserver(m.Observe))
//	m.WatchFallback("redis", fallback)
//
// Label values are the Limiters' configuration only: namespaces, route
// patterns, limit names and outcomes, never a key, an address or an API
// key. docs/observability.md lists the metrics and their labels.
package ratelimitprom

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/store"
)

// MaxSeries bounds the label sets of each per-request metric: past it, a
// new route or limit name is counted under "other", so that limits made
// per request ([ratelimit.WithLimitsFunc]), each with its own name, cannot
// grow the scrape without end.
const MaxSeries = 10_000

const other = "other"

// latencyBuckets are the store latency histogram's bounds, in seconds:
// Redis on a LAN answers in 100µs to 1ms; the Fallback's default budget
// is 50ms.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// Metrics counts the decisions of the Limiters it observes (pass
// [Metrics.Observe] to [ratelimit.WithObserver]) and reports the state of
// the Fallbacks it watches ([Metrics.WatchFallback]). It is a
// [prometheus.Collector]: register it once. It may observe any number of
// Limiters, told apart by namespace. It is safe for concurrent use.
type Metrics struct {
	vectors [6]prometheus.Collector // of the series below, for Describe and Collect

	reqs      *bounded.Map[labels, prometheus.Counter]
	verdicts  *bounded.Map[labels, prometheus.Counter]
	fellBack  *bounded.Map[labels, prometheus.Counter]
	charged   *bounded.Map[labels, prometheus.Counter]
	refills   *bounded.Map[labels, prometheus.Counter]
	durations *bounded.Map[string, prometheus.Observer]

	fallbacks   []watched
	fallbackMu  sync.Mutex
	fallbackSet fallbackDescs
}

// labels are a series' label values; those its vector has not are "".
type labels struct{ namespace, route, limit, outcome string }

// counters returns the counters of vec by labels, made once each with
// the label values values gives; past MaxSeries, a new one's route and
// limit are other.
func counters(vec *prometheus.CounterVec, values func(labels) []string) *bounded.Map[labels, prometheus.Counter] {
	return &bounded.Map[labels, prometheus.Counter]{Max: MaxSeries,
		Make:     func(l labels) prometheus.Counter { return vec.WithLabelValues(values(l)...) },
		Overflow: func(l labels) labels { l.route, l.limit = other, other; return l }}
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// New returns Metrics with no series: each appears with the first request it counts.
func New() *Metrics {
	requests := counterVec("ratelimit_requests_total",
		"Requests a rate limiter decided or could not decide, by namespace, route pattern and outcome.",
		"namespace", "route", "outcome")
	limits := counterVec("ratelimit_limit_decisions_total",
		"Each limit's verdict on the requests it applied to, by namespace, route pattern, limit name and outcome (allowed, denied, would_deny by a shadow limit, banned).",
		"namespace", "route", "limit", "outcome")
	local := counterVec("ratelimit_fallback_decisions_total",
		"Requests decided in process by a Fallback while Redis was unavailable, by namespace and route pattern.",
		"namespace", "route")
	usage := counterVec("ratelimit_usage_charged_total",
		"Units of usage charged to limits charged from usage once responses were done, by namespace and route pattern.",
		"namespace", "route")
	refills := counterVec("ratelimit_lease_refills_total",
		"Slices of leased limits this instance took from the store, by namespace, route pattern and limit name.",
		"namespace", "route", "limit")
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ratelimit_store_duration_seconds",
		Help:    "How long the store took to decide a request, or to fail, by namespace.",
		Buckets: latencyBuckets,
	}, []string{"namespace"})
	route := func(l labels) []string { return []string{l.namespace, l.route} }
	return &Metrics{
		vectors:  [...]prometheus.Collector{requests, limits, local, usage, refills, latency},
		reqs:     counters(requests, func(l labels) []string { return []string{l.namespace, l.route, l.outcome} }),
		verdicts: counters(limits, func(l labels) []string { return []string{l.namespace, l.route, l.limit, l.outcome} }),
		fellBack: counters(local, route),
		charged:  counters(usage, route),
		refills:  counters(refills, func(l labels) []string { return []string{l.namespace, l.route, l.limit} }),
		durations: &bounded.Map[string, prometheus.Observer]{Max: MaxSeries,
			Make:     func(ns string) prometheus.Observer { return latency.WithLabelValues(ns) },
			Overflow: func(string) string { return other }},
		fallbackSet: newFallbackDescs(),
	}
}

// Observe counts e. Pass it to [ratelimit.WithObserver].
func (m *Metrics) Observe(_ ratelimit.Request, e ratelimit.Event) {
	if e.Outcome == "changed" { // an operator's change, not a request
		return
	}
	if e.Latency > 0 {
		m.durations.Get(e.Namespace).Observe(e.Latency.Seconds())
	}
	if e.Outcome == "charged" { // a request's usage, not a decision
		m.charged.Get(labels{namespace: e.Namespace, route: e.Route}).Add(float64(e.Cost))
		return
	}
	m.reqs.Get(labels{namespace: e.Namespace, route: e.Route, outcome: e.Outcome}).Inc()
	if e.Decision.Fallback {
		m.fellBack.Get(labels{namespace: e.Namespace, route: e.Route}).Inc()
	}
	for _, res := range e.Decision.Results() {
		o := e.Outcome
		if res.Allowed {
			o = "allowed"
		}
		m.verdicts.Get(labels{e.Namespace, e.Route, res.Limit.Name, o}).Inc()
		if res.Leased > 0 {
			m.refills.Get(labels{namespace: e.Namespace, route: e.Route, limit: res.Limit.Name}).Inc()
		}
	}
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.vectors {
		c.Describe(ch)
	}
	m.fallbackSet.describe(ch)
}

// Collect implements [prometheus.Collector].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.vectors {
		c.Collect(ch)
	}
	m.fallbackMu.Lock()
	watched := append([]watched(nil), m.fallbacks...)
	m.fallbackMu.Unlock()
	for _, w := range watched {
		m.fallbackSet.collect(ch, w.name, w.f)
	}
}

// watched is a Fallback reported under a store label.
type watched struct {
	name string
	f    *store.Fallback
}

// WatchFallback reports f's state under the label store="name" at every
// scrape: whether it decides in process, since when, its moves, Redis
// errors, local decisions and reconciled keys. Name each Fallback of a
// process differently.
func (m *Metrics) WatchFallback(name string, f *store.Fallback) {
	m.fallbackMu.Lock()
	defer m.fallbackMu.Unlock()
	m.fallbacks = append(m.fallbacks, watched{name, f})
}
