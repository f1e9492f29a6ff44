package ratelimit

import (
	"testing"
	"time"
)

func TestDecisionDeniedBy(t *testing.T) {
	a, b, c := PerSecond(1), PerMinute(10), Limit{Quota: 100, Window: time.Hour}
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
			d: MakeDecision(
				Result{Limit: a, Allowed: true, Remaining: 0, ResetAfter: time.Second},
				Result{Limit: b, Allowed: true, Remaining: 5, ResetAfter: time.Minute},
			),
			tightest: a,
		},
		{
			name: "tie on remaining goes to the longest reset",
			d: MakeDecision(
				Result{Limit: a, Allowed: true, Remaining: 2, ResetAfter: time.Second},
				Result{Limit: b, Allowed: true, Remaining: 2, ResetAfter: time.Minute},
			),
			tightest: b,
		},
		{
			name: "denied by one",
			d: MakeDecision(
				Result{Limit: a, Allowed: true, Remaining: 1},
				Result{Limit: b, Allowed: false, RetryAfter: 30 * time.Second},
			),
			deniedBy: b, denied: true, retry: 30 * time.Second, tightest: b,
		},
		{
			name: "denied by two: the later one",
			d: MakeDecision(
				Result{Limit: a, Allowed: false, RetryAfter: time.Second},
				Result{Limit: b, Allowed: true, Remaining: 3},
				Result{Limit: c, Allowed: false, RetryAfter: time.Hour},
			),
			deniedBy: c, denied: true, retry: time.Hour, tightest: c,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := deniedBy(tt.d)
			if denied := r.Limit != (Limit{}); denied != tt.denied || (denied && r.Limit != tt.deniedBy) {
				t.Errorf("deniedBy = %v, %v; want %v, %v", r.Limit, denied, tt.deniedBy, tt.denied)
			}
			if got := tt.d.RetryAfter; got != tt.retry {
				t.Errorf("RetryAfter = %v, want %v", got, tt.retry)
			}
			tight := tt.d.Results()[0]
			for _, x := range tt.d.Results()[1:] {
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

// TestHeldUntilChargedCopies: a usage limit that reserved says at least
// a window until it resets, and the results a store shared between
// decisions are left as they were.
func TestHeldUntilChargedCopies(t *testing.T) {
	usage := Limit{Quota: 10, Window: time.Minute, Usage: true}
	plain := Limit{Quota: 10, Window: time.Minute}
	shared := MakeDecision(Result{Limit: plain, Allowed: true, ResetAfter: time.Second, Window: time.Minute},
		Result{Limit: usage, Allowed: true, Window: time.Minute})
	d := shared
	heldUntilCharged(&d)
	if got := d.Results()[1].ResetAfter; got != time.Minute {
		t.Errorf("the usage limit resets after %v; want a window, 1m", got)
	}
	if got := d.Results()[0].ResetAfter; got != time.Second {
		t.Errorf("the other limit resets after %v; want 1s, as the store said", got)
	}
	if got := shared.Results()[1].ResetAfter; got != 0 {
		t.Errorf("the store's shared results changed: %v; want 0", got)
	}
	one := MakeDecision(Result{Limit: usage, Allowed: true, Window: time.Minute})
	heldUntilCharged(&one)
	if got := one.Results()[0].ResetAfter; got != time.Minute {
		t.Errorf("one result: resets after %v; want 1m", got)
	}
}
