package ratelimit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// The bounds a Limit's fields must keep; see its documentation.
const (
	maxQuota           = 1<<53 - 1
	maxSlots           = 1000
	maxSlidingLogQuota = 100_000
)

func TestNewLimitsAcceptsValidLimits(t *testing.T) {
	valid := []ratelimit.Limit{
		ratelimit.PerMinute(1),
		ratelimit.Limit{Quota: 1, Window: time.Millisecond},
		ratelimit.Limit{Quota: maxQuota, Window: time.Hour}.Using(ratelimit.FixedWindow),
		ratelimit.PerMinute(maxSlidingLogQuota).Using(ratelimit.SlidingLog),
		{Quota: 1, Window: time.Second, Precision: time.Second / maxSlots},
		{Quota: 1, Window: 3 * time.Millisecond, Precision: 1500 * time.Microsecond},
		ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: 24 * time.Hour, Burst: 100_000},
		ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Second, Burst: maxQuota / 1_000_000},
		ratelimit.PerMinute(1).Named(strings.Repeat("n", 64)),
		ratelimit.PerMinute(1).Named(` !"#$%&'()*+,-./0123456789:;<=>?@AZ[\]^_` + "`az{|}~"),
	}
	for _, l := range valid {
		s, err := ratelimit.NewLimits(l)
		if err != nil {
			t.Errorf("%v: got %v, want nil", l, err)
			continue
		}
		if all := s.All(); len(all) != 1 || all[0] != l {
			t.Errorf("%v: the set holds %v", l, all)
		}
	}
}

func TestNewLimitsReportsTheField(t *testing.T) {
	tests := []struct {
		name   string
		limits []ratelimit.Limit
		want   string
	}{
		{"none", nil, "no limits given"},
		{"zero limit", []ratelimit.Limit{{}}, "limits[0].Quota"},
		{"unknown algorithm", []ratelimit.Limit{ratelimit.PerMinute(1).Using(ratelimit.Algorithm(4))}, "limits[0].Algorithm"},
		{"quota too large", []ratelimit.Limit{ratelimit.Limit{Quota: maxQuota + 1, Window: time.Hour}.Using(ratelimit.FixedWindow)}, "limits[0].Quota"},
		{"window under a millisecond", []ratelimit.Limit{ratelimit.Limit{Quota: 1, Window: time.Microsecond}}, "limits[0].Window"},
		{"window not in whole milliseconds", []ratelimit.Limit{ratelimit.Limit{Quota: 1, Window: 1500 * time.Microsecond}}, "limits[0].Window"},
		{"precision not in whole microseconds", []ratelimit.Limit{{Quota: 1, Window: time.Minute, Precision: 1500 * time.Nanosecond}}, "limits[0].Precision"},
		{"precision not dividing the window", []ratelimit.Limit{{Quota: 1, Window: time.Minute, Precision: 7 * time.Second}}, "limits[0].Precision"},
		{"precision over the window", []ratelimit.Limit{{Quota: 1, Window: time.Second, Precision: 2 * time.Second}}, "limits[0].Precision"},
		{"too many slots", []ratelimit.Limit{{Quota: 1, Window: 2 * time.Second, Precision: time.Second / maxSlots}}, "limits[0].Precision"},
		{"precision of another algorithm", []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Quota: 1, Window: time.Minute, Precision: time.Second}}, "limits[0].Precision"},
		{"sliding log too long", []ratelimit.Limit{ratelimit.PerMinute(maxSlidingLogQuota + 1).Using(ratelimit.SlidingLog)}, "limits[0].Quota"},
		{"negative burst", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Minute, Burst: -3}}, "limits[0].Burst"},
		{"burst too large", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Minute, Burst: maxQuota + 1}}, "limits[0].Burst"},
		// 7 per day and a millisecond: a token is 86,400,001 units, and a
		// burst this large overflows 53 bits.
		{"bucket level over 53 bits", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 7, Window: 24*time.Hour + time.Millisecond, Burst: maxQuota / 2}}, "limits[0].Burst"},
		{"bucket level just over 53 bits", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Second, Burst: maxQuota/1_000_000 + 1}}, "limits[0].Burst"},
		{"burst of another algorithm", []ratelimit.Limit{ratelimit.Limit{Quota: 1, Window: time.Minute, Burst: 2}}, "limits[0].Burst"},
		{"name too long", []ratelimit.Limit{ratelimit.PerMinute(1).Named(strings.Repeat("n", 65))}, "limits[0].Name"},
		{"name not ASCII", []ratelimit.Limit{ratelimit.PerMinute(1).Named("café")}, "limits[0].Name"},
		{"name with a newline", []ratelimit.Limit{ratelimit.PerMinute(1).Named("a\nb")}, "limits[0].Name"},
		{"second limit invalid", []ratelimit.Limit{ratelimit.PerMinute(1), ratelimit.PerSecond(0)}, "limits[1].Quota"},
		{"names repeated", []ratelimit.Limit{ratelimit.PerMinute(1).Named("x"), ratelimit.PerSecond(9).Named("x")}, "limits[1].Name"},
		{"same window and algorithm", []ratelimit.Limit{ratelimit.PerMinute(1), ratelimit.PerMinute(2)}, "limits[0] (1 per 1m, sliding-window) and limits[1] (2 per 1m, sliding-window) would count into one place"},
		{"same window, explicit default precision", []ratelimit.Limit{ratelimit.PerMinute(1), {Quota: 2, Window: time.Minute, Precision: 6 * time.Second}}, "would count into one place"},
		{"same bucket, other bursts", []ratelimit.Limit{
			ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 5, Window: time.Minute, Burst: 5},
			ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 5, Window: time.Minute, Burst: 9},
		}, "would count into one place"},
		{"same bucket, default burst", []ratelimit.Limit{
			ratelimit.PerMinute(5).Using(ratelimit.TokenBucket),
			ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 5, Window: time.Minute, Burst: 5},
		}, "would count into one place"},
		{"same window, other names", []ratelimit.Limit{
			ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("a"),
			ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("b"),
		}, "would count into one place"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ratelimit.NewLimits(tt.limits...)
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid saying %q", s, err, tt.want)
			}
		})
	}
}

// TestNewLimitsKeepsLimitsApart: limits that differ in algorithm, window,
// precision or a bucket's rate count apart, so a set may hold them all.
func TestNewLimitsKeepsLimitsApart(t *testing.T) {
	limits := []ratelimit.Limit{
		ratelimit.PerMinute(1),
		{Quota: 1, Window: time.Minute, Precision: time.Second},
		ratelimit.PerMinute(1).Using(ratelimit.FixedWindow),
		ratelimit.PerMinute(1).Using(ratelimit.SlidingLog),
		ratelimit.PerMinute(5).Using(ratelimit.TokenBucket),
		ratelimit.PerMinute(6).Using(ratelimit.TokenBucket),
		ratelimit.PerSecond(1),
	}
	s, err := ratelimit.NewLimits(limits...)
	if err != nil {
		t.Fatalf("NewLimits: %v", err)
	}
	if len(s.All()) != len(limits) {
		t.Fatalf("All: got %d limits, want %d", len(s.All()), len(limits))
	}
	for i, l := range limits {
		if got := s.All()[i]; got != l {
			t.Errorf("At(%d): got %v, want %v", i, got, l)
		}
	}
}

// TestNewLimitsCopies: the set does not change with the slice it was
// built from.
func TestNewLimitsCopies(t *testing.T) {
	limits := []ratelimit.Limit{ratelimit.PerMinute(1), ratelimit.PerSecond(1)}
	s, err := ratelimit.NewLimits(limits...)
	if err != nil {
		t.Fatalf("NewLimits: %v", err)
	}
	limits[0] = ratelimit.PerMinute(0)
	if got, want := s.All()[0], ratelimit.PerMinute(1); got != want {
		t.Errorf("At(0) after the slice changed: got %v, want %v", got, want)
	}
}
