package ratelimit

import (
	"errors"
	"strings"
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
		{PerHour(100), Limit{Quota: 100, Window: time.Hour}},
		{PerDay(1000), Limit{Quota: 1000, Window: 24 * time.Hour}},
		{Per(3, 15*time.Minute).Using(SlidingLog).Named("login"), Limit{Algorithm: SlidingLog, Quota: 3, Window: 15 * time.Minute, Name: "login"}},
		{PerSecond(10).Using(TokenBucket).WithBurst(50), Limit{Algorithm: TokenBucket, Quota: 10, Window: time.Second, Burst: 50}},
		{PerMinute(60).WithPrecision(time.Second), Limit{Quota: 60, Window: time.Minute, Precision: time.Second}},
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
		{PerSecond(10).Using(TokenBucket).WithBurst(20), "10 per 1s, token-bucket, burst 20"},
		{PerDay(1000).Using(FixedWindow), "1000 per 24h, fixed-window"},
		{Per(7, 90*time.Minute).WithPrecision(9 * time.Minute), "7 per 1h30m, sliding-window, precision 9m"},
		{Per(1, 1500*time.Millisecond), "1 per 1.5s, sliding-window"},
	}
	for _, tt := range tests {
		if got := tt.limit.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestLimitDefaults(t *testing.T) {
	l := PerMinute(10).WithDefaults()
	if got, want := l.Precision, 6*time.Second; got != want {
		t.Errorf("default precision: got %v, want %v", got, want)
	}
	tb := PerMinute(10).Using(TokenBucket)
	if got, want := tb.WithDefaults().Burst, 10; got != want {
		t.Errorf("default burst: got %d, want %d", got, want)
	}
	if got, want := tb.Capacity(), 10; got != want {
		t.Errorf("Capacity without burst: got %d, want %d", got, want)
	}
	if got, want := tb.WithBurst(3).Capacity(), 3; got != want {
		t.Errorf("Capacity with burst: got %d, want %d", got, want)
	}
}

func TestLimitValidate(t *testing.T) {
	valid := []Limit{
		PerMinute(1), Per(1, time.Millisecond), Per(MaxQuota, time.Hour).Using(FixedWindow),
		PerMinute(MaxSlidingLogQuota).Using(SlidingLog),
		PerSecond(MaxSlots).WithPrecision(time.Millisecond),
		PerDay(1).Using(TokenBucket).WithBurst(100_000),
	}
	for _, l := range valid {
		if err := l.Validate(); err != nil {
			t.Errorf("%v: got %v, want nil", l, err)
		}
	}
	invalid := []struct {
		limit Limit
		field string
	}{
		{Limit{}, "Quota"},
		{PerMinute(1).Using(Algorithm(4)), "Algorithm"},
		{Per(1, time.Microsecond), "Window"},
		{PerMinute(1).WithPrecision(time.Nanosecond * 1500), "Precision"},
		{PerMinute(MaxSlidingLogQuota + 1).Using(SlidingLog), "Quota"},
		{PerMinute(1).Using(TokenBucket).WithBurst(-3), "Burst"},
		// 1 per 1µs-unit for a day: a burst this large overflows 53 bits.
		{Per(7, 24*time.Hour+time.Millisecond).Using(TokenBucket).WithBurst(MaxQuota / 2), "Burst"},
	}
	for _, tt := range invalid {
		err := tt.limit.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Limit."+tt.field) {
			t.Errorf("%+v: got %v, want ErrInvalid naming Limit.%s", tt.limit, err, tt.field)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingLog, SlidingWindow, TokenBucket} {
		got, err := ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", a.String(), got, err, a)
		}
	}
	if _, err := ParseAlgorithm("leaky-bucket"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseAlgorithm(leaky-bucket): got %v, want ErrInvalid", err)
	}
	if got, want := Algorithm(9).String(), "Algorithm(9)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTokenUnits(t *testing.T) {
	tests := []struct {
		limit                Limit
		unit, rate, capacity int64
	}{
		// 10 per second: a token is 100,000 units, 1 unit per µs.
		{PerSecond(10).Using(TokenBucket), 100_000, 1, 1_000_000},
		// 3 per second: 1,000,000 units, 3 per µs; no rounding anywhere.
		{PerSecond(3).Using(TokenBucket).WithBurst(5), 1_000_000, 3, 5_000_000},
		{PerMinute(7).Using(TokenBucket), 60_000_000, 7, 420_000_000},
	}
	for _, tt := range tests {
		unit, rate, capacity, ok := tt.limit.TokenUnits()
		if !ok || unit != tt.unit || rate != tt.rate || capacity != tt.capacity {
			t.Errorf("%v: got (%d, %d, %d, %v), want (%d, %d, %d, true)", tt.limit, unit, rate, capacity, ok, tt.unit, tt.rate, tt.capacity)
		}
	}
}
