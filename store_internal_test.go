package ratelimit

import (
	"slices"
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

// TestMakeDecision: Allowed when every result allows, the results a copy
// of those given, in their order, and a copied Decision of one result
// independent of the original.
func TestMakeDecision(t *testing.T) {
	yes := Result{Limit: PerSecond(1), Allowed: true, Remaining: 1}
	no := Result{Limit: PerMinute(10), RetryAfter: time.Second}
	tests := []struct {
		name    string
		results []Result
		allowed bool
	}{
		{"none", nil, false},
		{"one allows", []Result{yes}, true},
		{"one denies", []Result{no}, false},
		{"two allow", []Result{yes, yes}, true},
		{"one of three denies", []Result{yes, no, yes}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			given := append([]Result(nil), tt.results...)
			d := MakeDecision(given...)
			if d.Allowed != tt.allowed {
				t.Errorf("Allowed: got %v, want %v", d.Allowed, tt.allowed)
			}
			for i := range given {
				given[i].Remaining = 99 // the Decision holds a copy
			}
			if got := d.Results(); !slices.Equal(got, tt.results) || (got == nil) != (tt.results == nil) {
				t.Errorf("Results: got %+v, want %+v", got, tt.results)
			}
		})
	}
	d := MakeDecision(yes)
	c := d
	c.Results()[0].Remaining = 7
	if got := d.Results()[0].Remaining; got != 1 {
		t.Errorf("a change to a copy's result: the original's Remaining is %d, want 1", got)
	}
}
