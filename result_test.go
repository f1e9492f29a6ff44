package ratelimit

import (
	"testing"
	"time"
)

func TestDecisionDeniedBy(t *testing.T) {
	a, b, c := PerSecond(1), PerMinute(10), Per(100, time.Hour)
	tests := []struct {
		name     string
		d        Decision
		deniedBy Limit
		denied   bool
		retry    time.Duration
		tightest Limit
	}{
		{
			name: "allowed",
			d: Decision{Allowed: true, Results: []Result{
				{Limit: a, Allowed: true, Remaining: 0, ResetAfter: time.Second},
				{Limit: b, Allowed: true, Remaining: 5, ResetAfter: time.Minute},
			}},
			tightest: a,
		},
		{
			name: "tie on remaining goes to the longest reset",
			d: Decision{Allowed: true, Results: []Result{
				{Limit: a, Allowed: true, Remaining: 2, ResetAfter: time.Second},
				{Limit: b, Allowed: true, Remaining: 2, ResetAfter: time.Minute},
			}},
			tightest: b,
		},
		{
			name: "denied by one",
			d: Decision{Results: []Result{
				{Limit: a, Allowed: true, Remaining: 1},
				{Limit: b, Allowed: false, RetryAfter: 30 * time.Second},
			}},
			deniedBy: b, denied: true, retry: 30 * time.Second, tightest: b,
		},
		{
			name: "denied by two: the later one",
			d: Decision{Results: []Result{
				{Limit: a, Allowed: false, RetryAfter: time.Second},
				{Limit: b, Allowed: true, Remaining: 3},
				{Limit: c, Allowed: false, RetryAfter: time.Hour},
			}},
			deniedBy: c, denied: true, retry: time.Hour, tightest: c,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, denied := tt.d.DeniedBy()
			if denied != tt.denied || (denied && r.Limit != tt.deniedBy) {
				t.Errorf("DeniedBy() = %v, %v; want %v, %v", r.Limit, denied, tt.deniedBy, tt.denied)
			}
			if got := tt.d.RetryAfter(); got != tt.retry {
				t.Errorf("RetryAfter() = %v, want %v", got, tt.retry)
			}
			tight := tt.d.Results[0]
			for _, x := range tt.d.Results[1:] {
				if tighter(x, tight) {
					tight = x
				}
			}
			if tight.Limit != tt.tightest {
				t.Errorf("the tightest result is of %v, want %v", tight.Limit, tt.tightest)
			}
		})
	}
}
