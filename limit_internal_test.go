package ratelimit

import (
	"slices"
	"testing"
	"time"
)

func TestLimitConstructors(t *testing.T) {
	tests := []struct {
		got  Limit
		want Limit
	}{
		{PerSecond(10), Limit{Quota: 10, Window: time.Second}},
		{PerMinute(5), Limit{Quota: 5, Window: time.Minute}},
		{Limit{Quota: 100, Window: time.Hour}, Limit{Quota: 100, Window: time.Hour}},
		{Limit{Quota: 3, Window: 15 * time.Minute}.Using(SlidingLog).Named("login"), Limit{Algorithm: SlidingLog, Quota: 3, Window: 15 * time.Minute, Name: "login"}},
		{Limit{Algorithm: TokenBucket, Quota: 10, Window: time.Second, Burst: 50}, Limit{Algorithm: TokenBucket, Quota: 10, Window: time.Second, Burst: 50}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %+v, want %+v", tt.got, tt.want)
		}
	}
}

func TestLimitString(t *testing.T) {
	tests := []struct {
		limit Limit
		want  string
	}{
		{PerMinute(100), "100 per 1m, sliding-window"},
		{PerMinute(5).Using(SlidingLog).Named("login"), "login: 5 per 1m, sliding-log"},
		{Limit{Algorithm: TokenBucket, Quota: 10, Window: time.Second, Burst: 20}, "10 per 1s, token-bucket, burst 20"},
		{Limit{Quota: 1000, Window: 24 * time.Hour}.Using(FixedWindow), "1000 per 24h, fixed-window"},
		{Limit{Quota: 7, Window: 90 * time.Minute, Precision: 9 * time.Minute}, "7 per 1h30m, sliding-window, precision 9m"},
		{Limit{Quota: 7, Window: 2 * time.Second, Precision: 1500 * time.Microsecond}, "7 per 2s, sliding-window, precision 1.5ms"},
		{Limit{Quota: 1, Window: 1500 * time.Millisecond}, "1 per 1.5s, sliding-window"},
		{Limit{Algorithm: Monthly, Quota: 1_000_000, Name: "gen-month"}, "gen-month: 1000000 per calendar month in UTC"},
		{Limit{Algorithm: Monthly, Quota: 1_000_000, Usage: true}, "1000000 per calendar month in UTC, charged from usage"},
		{Limit{Quota: 40_000, Window: time.Minute, Usage: true}, "40000 per 1m, sliding-window, charged from usage"},
		{Limit{Algorithm: Concurrent, Quota: 4, Name: "gen-concurrent"}, "gen-concurrent: 4 in flight, slots of 30s"},
		{Limit{Algorithm: Daily, Quota: 50, Zone: "Europe/Paris"}, "50 per calendar day in Europe/Paris"},
		{Limit{Algorithm: Weekly, Quota: 9, Zone: "America/New_York", Weekday: time.Monday}, "9 per calendar week from Monday in America/New_York"},
	}
	for _, tt := range tests {
		if got := tt.limit.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestLimitDefaults(t *testing.T) {
	l := PerMinute(10).withDefaults()
	if got, want := l.Precision, 6*time.Second; got != want {
		t.Errorf("default precision: got %v, want %v", got, want)
	}
	tb := PerMinute(10).Using(TokenBucket)
	if got, want := tb.withDefaults().Burst, 10; got != want {
		t.Errorf("default burst: got %d, want %d", got, want)
	}
	if got, want := tb.capacity(), 10; got != want {
		t.Errorf("capacity without burst: got %d, want %d", got, want)
	}
	if got, want := (Limit{Algorithm: TokenBucket, Quota: 10, Window: time.Minute, Burst: 3}).capacity(), 3; got != want {
		t.Errorf("capacity with burst: got %d, want %d", got, want)
	}
	for _, l := range []Limit{PerMinute(10).Using(FixedWindow), PerMinute(10).Using(SlidingLog)} {
		if got := l.withDefaults(); got != l {
			t.Errorf("%v: withDefaults gave %+v, want it unchanged", l, got)
		}
	}
}

// TestPolicyHeaders: the names and values a policy's headers carry,
// worked out once when it is built.
func TestPolicyHeaders(t *testing.T) {
	tests := []struct {
		name     string
		limits   []Limit
		policy   string
		capacity []string
	}{
		{
			name:     "named",
			limits:   []Limit{PerMinute(100).Named("api")},
			policy:   `"api";q=100;w=60`,
			capacity: []string{"100"},
		},
		{
			name:     "unnamed: quota and window",
			limits:   []Limit{Limit{Quota: 10, Window: 90 * time.Minute}, PerSecond(3)},
			policy:   `"10-per-1h30m";q=10;w=5400, "3-per-1s";q=3;w=1`,
			capacity: []string{"10", "3"},
		},
		{
			name:     "same quota and window: the algorithm tells them apart",
			limits:   []Limit{PerMinute(5).Using(FixedWindow), PerMinute(5).Using(SlidingLog)},
			policy:   `"5-per-1m-fixed-window";q=5;w=60, "5-per-1m-sliding-log";q=5;w=60`,
			capacity: []string{"5", "5"},
		},
		{
			name:     "a name taken by another limit",
			limits:   []Limit{PerSecond(10).Using(FixedWindow).Named("10-per-1s"), PerSecond(10)},
			policy:   `"10-per-1s";q=10;w=1, "10-per-1s-2";q=10;w=1`,
			capacity: []string{"10", "10"},
		},
		{
			name:     "token bucket: the burst and the time to refill it",
			limits:   []Limit{Limit{Algorithm: TokenBucket, Quota: 3, Window: 1500 * time.Millisecond, Burst: 6}, PerMinute(2).Using(TokenBucket)},
			policy:   `"3-per-1.5s";q=6;w=3, "2-per-1m";q=2;w=60`,
			capacity: []string{"6", "2"},
		},
		{
			name:     "sub-second window: rounded up",
			limits:   []Limit{Limit{Quota: 1, Window: 1500 * time.Millisecond}.Using(FixedWindow).Named(`say "hi"\`)},
			policy:   `"say \"hi\"\\";q=1;w=2`,
			capacity: []string{"1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, problem := policyBase{namespace: "api"}.newPolicy("", tt.limits)
			if problem != "" {
				t.Fatal(problem)
			}
			if got := p.policyValue; len(got) != 1 || got[0] != tt.policy {
				t.Errorf("RateLimit-Policy: got %q, want %q", got, tt.policy)
			}
			var capacity []string
			for _, c := range p.capacity {
				capacity = append(capacity, c...)
			}
			if !slices.Equal(capacity, tt.capacity) {
				t.Errorf("X-RateLimit-Limit: got %q, want %q", capacity, tt.capacity)
			}
		})
	}
}
