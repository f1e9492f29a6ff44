package ratelimit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/httpcases"
)

// TestOptionsReportTheirName: New refuses a bad option with an error
// naming it, and for limits, the limit and field at fault.
func TestOptionsReportTheirName(t *testing.T) {
	s := httpcases.NewStore(t)
	ok := ratelimit.WithLimits(ratelimit.PerMinute(10))
	tests := []struct {
		name string
		opts []ratelimit.Option
		want string
	}{
		{"no limit", []ratelimit.Option{ratelimit.WithLimits()}, "WithLimits: no limits given"},
		{"bad limit", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(0))}, "WithLimits: limits[0].Quota"},
		{"bad second limit", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1), ratelimit.PerSecond(1).WithBurst(2))}, "WithLimits: limits[1].Burst"},
		{"limits sharing state", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1), ratelimit.PerMinute(2))}, "WithLimits: limits[0]"},
		{"name not ASCII", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("café"))}, "WithLimits: limits[0].Name"},
		{"name with a newline", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("a\nb"))}, "WithLimits: limits[0].Name"},
		{"names repeated", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("x"), ratelimit.PerSecond(9).Named("x"))}, "WithLimits: limits[1].Name"},
		{"nil key", []ratelimit.Option{ok, ratelimit.WithKey(nil)}, "WithKey"},
		{"nil cost", []ratelimit.Option{ok, ratelimit.WithCost(nil)}, "WithCost"},
		{"nil skip", []ratelimit.Option{ok, ratelimit.WithSkip(nil)}, "WithSkip"},
		{"nil deny handler", []ratelimit.Option{ok, ratelimit.WithDenyHandler(nil)}, "WithDenyHandler"},
		{"nil error handler", []ratelimit.Option{ok, ratelimit.WithErrorHandler(nil)}, "WithErrorHandler"},
		{"unknown header style", []ratelimit.Option{ok, ratelimit.WithHeaders(ratelimit.HeaderStyle(8))}, "WithHeaders"},
		{"nil logger", []ratelimit.Option{ok, ratelimit.WithLogger(nil)}, "WithLogger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(s, "test", tt.opts...)
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid naming %q", l, err, tt.want)
			}
		})
	}
}
