package ratelimit

import (
	"slices"
	"testing"
	"time"
)

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
