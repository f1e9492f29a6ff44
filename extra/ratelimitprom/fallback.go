package ratelimitprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimit-go/ratelimit/store"
)

// fallbackDescs describe a watched Fallback's metrics, read from its Health per scrape.
type fallbackDescs struct {
	active, changed, transitions, errors, local, reconciled, waiting *prometheus.Desc
}

func newFallbackDescs() fallbackDescs {
	store := []string{"store"}
	return fallbackDescs{
		active: prometheus.NewDesc("ratelimit_fallback_active",
			"1 while the Fallback decides in process because Redis is unavailable, 0 while Redis decides.", store, nil),
		changed: prometheus.NewDesc("ratelimit_fallback_last_change_timestamp_seconds",
			"When decisions last moved to memory or back to Redis, or the Fallback was made, in seconds since the Unix epoch.", store, nil),
		transitions: prometheus.NewDesc("ratelimit_fallback_transitions_total",
			"Times decisions moved: to=\"in_process\" when Redis failed, to=\"redis\" when it came back.", []string{"store", "to"}, nil),
		errors: prometheus.NewDesc("ratelimit_fallback_redis_errors_total",
			"Redis calls that failed or overran the budget, by kind: outage (it may pass) or misconfigured (someone must fix the setup).", []string{"store", "kind"}, nil),
		local: prometheus.NewDesc("ratelimit_fallback_local_decisions_total",
			"Decisions the Fallback made in process.", store, nil),
		reconciled: prometheus.NewDesc("ratelimit_fallback_reconciled_keys_total",
			"Keys whose in-process admissions and resets were brought to Redis when it came back.", store, nil),
		waiting: prometheus.NewDesc("ratelimit_fallback_waiting_keys",
			"Keys decided in process because what was decided for them in process has yet to reach Redis; 0 once every key is back on Redis.", store, nil),
	}
}

func (d *fallbackDescs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{d.active, d.changed, d.transitions, d.errors, d.local, d.reconciled, d.waiting} {
		ch <- desc
	}
}

// collect sends f's metrics under store=name.
func (d *fallbackDescs) collect(ch chan<- prometheus.Metric, name string, f *store.Fallback) {
	h := f.Health()
	active := 0.0
	if h.Decisions != "redis" {
		active = 1
	}
	ch <- prometheus.MustNewConstMetric(d.active, prometheus.GaugeValue, active, name)
	ch <- prometheus.MustNewConstMetric(d.changed, prometheus.GaugeValue, float64(h.Since.UnixNano())/1e9, name)
	ch <- prometheus.MustNewConstMetric(d.transitions, prometheus.CounterValue, float64(h.Outages), name, "in_process")
	ch <- prometheus.MustNewConstMetric(d.transitions, prometheus.CounterValue, float64(h.Recoveries), name, "redis")
	outages := h.Failures - min(h.Misconfigured, h.Failures) // the two are read one after the other
	ch <- prometheus.MustNewConstMetric(d.errors, prometheus.CounterValue, float64(outages), name, "outage")
	ch <- prometheus.MustNewConstMetric(d.errors, prometheus.CounterValue, float64(h.Misconfigured), name, "misconfigured")
	ch <- prometheus.MustNewConstMetric(d.local, prometheus.CounterValue, float64(h.Local), name)
	ch <- prometheus.MustNewConstMetric(d.reconciled, prometheus.CounterValue, float64(h.Reconciled), name)
	ch <- prometheus.MustNewConstMetric(d.waiting, prometheus.GaugeValue, float64(h.Waiting), name)
}
