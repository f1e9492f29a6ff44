package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

func TestAlgorithmString(t *testing.T) {
	tests := []struct {
		a    ratelimit.Algorithm
		want string
	}{
		{ratelimit.SlidingWindow, "sliding-window"},
		{ratelimit.FixedWindow, "fixed-window"},
		{ratelimit.SlidingLog, "sliding-log"},
		{ratelimit.TokenBucket, "token-bucket"},
		{ratelimit.Algorithm(9), "Algorithm(9)"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("Algorithm(%d).String(): got %q, want %q", uint8(tt.a), got, tt.want)
		}
	}
	if got := (ratelimit.Limit{}).Algorithm; got != ratelimit.SlidingWindow {
		t.Errorf("the zero Limit's algorithm: got %v, want sliding-window", got)
	}
}

// TestTokenBucketRefillIsExact: a token bucket refills in exact integer
// steps, whatever its rate, so a token comes back at the first whole
// microsecond its share of the window has passed, not a rounding later or
// earlier. The store's clock is pinned.
func TestTokenBucketRefillIsExact(t *testing.T) {
	tests := []struct {
		limit ratelimit.Limit
		full  time.Duration // from empty to full
		token time.Duration // from empty to one token
	}{
		{ratelimit.PerSecond(10).Using(ratelimit.TokenBucket), time.Second, 100 * time.Millisecond},
		{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 3, Window: time.Second, Burst: 5}, 1_666_667 * time.Microsecond, 333_334 * time.Microsecond},
		{ratelimit.PerMinute(7).Using(ratelimit.TokenBucket), time.Minute, 8_571_429 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.limit.String(), func(t *testing.T) {
			start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			now := start
			s, err := store.NewMemory(store.MemoryOptions{Clock: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			limits, err := ratelimit.NewLimits(tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			allow := func(cost int) ratelimit.Result {
				t.Helper()
				d, err := s.Allow(context.Background(), "k", cost, limits)
				if err != nil {
					t.Fatalf("Allow: %v", err)
				}
				return d.Results()[0]
			}
			burst := capacity(tt.limit)
			if r := allow(burst); !r.Allowed || r.Remaining != 0 || r.ResetAfter != tt.full {
				t.Fatalf("taking the whole burst: got %+v, want allowed, 0 remaining, reset after %v", r, tt.full)
			}
			now = start.Add(tt.token - time.Microsecond)
			if r := allow(1); r.Allowed || r.RetryAfter != time.Microsecond {
				t.Fatalf("1µs before a token is back: got %+v, want denied, retry after 1µs", r)
			}
			now = start.Add(tt.token)
			if r := allow(1); !r.Allowed || r.Remaining != 0 {
				t.Fatalf("when a token is back: got %+v, want allowed, 0 remaining", r)
			}
		})
	}
}
