package main

import (
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
)

// TestMetricsScrape sends a known sequence to each example server, on the
// embedded Redis and on a real redis-server behind a Fallback, scrapes
// GET /metrics with Prometheus's text parser, and checks the series: the
// counts by outcome and by limit, one latency observation per decision,
// the Fallback's gauge on Redis, and no client identifier in any label.
func TestMetricsScrape(t *testing.T) {
	forEachServer(t, func(t *testing.T, _, bin string, args []string, client *redis.Client) {
		base := start(t, bin, append(args, "-limit", "3", "-window", "1h", "-algorithm", "fixed-window")...)
		for i, want := range []int{200, 200, 200, 429} {
			if got := send(t, "GET", base+"/", nil, nil).StatusCode; got != want {
				t.Fatalf("GET / #%d: got %d, want %d", i+1, got, want)
			}
		}
		const apiKey = "free-a-secret-api-key"
		for range 2 {
			send(t, "GET", base+"/api/items", map[string]string{"X-API-Key": apiKey}, nil)
		}
		resp := send(t, "GET", base+"/metrics", nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /metrics: %d", resp.StatusCode)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("parsing /metrics: %v", err)
		}
		for _, tt := range []struct {
			name   string
			labels string
			want   float64
		}{
			{"ratelimit_requests_total", `namespace="ip",outcome="allowed",route=""`, 3},
			{"ratelimit_requests_total", `namespace="ip",outcome="denied",route=""`, 1},
			{"ratelimit_limit_decisions_total", `limit="home",namespace="ip",outcome="allowed",route=""`, 3},
			{"ratelimit_limit_decisions_total", `limit="home",namespace="ip",outcome="denied",route=""`, 1},
			{"ratelimit_requests_total", `namespace="api",outcome="allowed",route=""`, 2},
			{"ratelimit_limit_decisions_total", `limit="api-second",namespace="api",outcome="allowed",route=""`, 2},
			{"ratelimit_limit_decisions_total", `limit="api-hour",namespace="api",outcome="allowed",route=""`, 2},
			{"ratelimit_store_duration_seconds", `namespace="ip"`, 4}, // the histogram's count
		} {
			if got, ok := series(mfs, tt.name, tt.labels); !ok || got != tt.want {
				t.Errorf("%s{%s}: got %v (found %v), want %v", tt.name, tt.labels, got, ok, tt.want)
			}
		}
		active, ok := series(mfs, "ratelimit_fallback_active", `store="redis"`)
		onRedis := client != nil // a real redis-server behind a Fallback
		if onRedis && (!ok || active != 0) {
			t.Errorf("ratelimit_fallback_active: got %v (found %v), want 0 on a running Redis", active, ok)
		}
		if !onRedis && ok {
			t.Error("ratelimit_fallback_active is reported without a Fallback")
		}
		for name, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if v := l.GetValue(); strings.Contains(v, "127.0.0.1") || strings.Contains(v, apiKey) {
						t.Errorf("%s has a client identifier in label %s=%q", name, l.GetName(), v)
					}
				}
			}
		}
	})
}

// series returns the value of the series of metric name whose labels,
// written as in the text format and sorted by name, are labels: a
// counter's or gauge's value, a histogram's count.
func series(mfs map[string]*dto.MetricFamily, name, labels string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		if strings.Join(ls, ",") != labels {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}
