package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name              string
		got               Limit
		suffix            string
		args              LimitArgs
		capacity          int64
		width, slots      int64
		unit, rate, units int64
	}{
		{"fixed window", Compile(FixedWindow, 5, time.Minute, 0, 0), ":f60000", LimitArgs{"f", "5", "60000", "0"}, 5, 0, 0, 0, 0, 0},
		{"sliding log", Compile(SlidingLog, 5, time.Second, 0, 0), ":l1000", LimitArgs{"l", "5", "1000000", "1000"}, 5, 0, 0, 0, 0, 0},
		{"sliding window", Compile(SlidingWindow, 100, time.Minute, 6*time.Second, 0), ":s60000/10", LimitArgs{"s", "100", "6000000", "10"}, 100, 6_000_000, 10, 0, 0, 0},
		// 3 per second: a token is 1,000,000/3 µs, so units of 1/3 µs.
		{"token bucket", Compile(TokenBucket, 3, time.Second, 0, 7), ":t1000/3", LimitArgs{"t", "7000000", "1000000", "3"}, 7, 0, 0, 1_000_000, 3, 7_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.got
			if g.Suffix != tt.suffix || g.Args != tt.args || g.Capacity != tt.capacity {
				t.Errorf("got suffix %q args %v capacity %d, want %q %v %d", g.Suffix, g.Args, g.Capacity, tt.suffix, tt.args, tt.capacity)
			}
			if g.Width != tt.width || g.Slots != tt.slots || g.Unit != tt.unit || g.Rate != tt.rate || g.Units != tt.units {
				t.Errorf("got width %d slots %d unit %d rate %d units %d, want %d %d %d %d %d", g.Width, g.Slots, g.Unit, g.Rate, g.Units, tt.width, tt.slots, tt.unit, tt.rate, tt.units)
			}
		})
	}
}

func TestTokenUnitsBound(t *testing.T) {
	// A day in µs over a quota of 1: a token is 86.4e9 units. A burst of
	// 104,249 fits under 2^53; one more does not.
	day := int64(24 * time.Hour / time.Microsecond)
	if _, _, units, ok := TokenUnits(day, 1, 104_249); !ok || units > wire.MaxQuota {
		t.Errorf("burst 104249: got units %d ok %v, want <= 2^53-1 and ok", units, ok)
	}
	if _, _, _, ok := TokenUnits(day, 1, 104_250); ok {
		t.Errorf("burst 104250: got ok, want not: %d units exceed 2^53-1", day*104_250)
	}
}

func TestShare(t *testing.T) {
	set := NewSet([]Limit{
		Compile(FixedWindow, 10, time.Minute, 0, 0),
		Compile(TokenBucket, 5, time.Second, 0, 9),
	})
	if set.MinCapacity != 9 {
		t.Fatalf("MinCapacity = %d, want 9", set.MinCapacity)
	}
	if set.Share(1) != set {
		t.Errorf("Share(1) is a new set, want the set itself")
	}
	half := set.Share(2)
	if got := [2]int64{half.Limits[0].Capacity, half.Limits[1].Capacity}; got != [2]int64{5, 5} {
		t.Errorf("Share(2) capacities = %v, want [5 5] (10/2, 9/2 rounded up)", got)
	}
	if half.Limits[1].Quota != 3 {
		t.Errorf("Share(2) token bucket quota = %d, want 3 (5/2 rounded up)", half.Limits[1].Quota)
	}
	if set.Share(2) != half {
		t.Errorf("Share(2) asked twice gave two sets, want it kept")
	}
	if third := set.Share(3); third.Limits[0].Capacity != 4 {
		t.Errorf("Share(3) fixed window capacity = %d, want 4", third.Limits[0].Capacity)
	}
	// A share whose fixed point would overflow keeps the whole limit: 2
	// per day with a burst of 208,499 is exact (a token is 43.2e9 units),
	// but 1 per day with 104,250 is not (86.4e9 × 104,250 > 2^53).
	day := 24 * time.Hour
	whole := Compile(TokenBucket, 2, day, 0, 208_499)
	if _, _, _, ok := TokenUnits(whole.Window, 2, 208_499); !ok {
		t.Fatalf("the whole bucket does not fit; the test needs one that does")
	}
	if got := NewSet([]Limit{whole}).Share(2).Limits[0]; got != whole {
		t.Errorf("Share(2) of a bucket whose half would overflow: got %+v, want the whole limit", got)
	}
}

func TestBan(t *testing.T) {
	minute := int64(time.Minute / time.Microsecond)
	b := NewBan(3, minute, minute, 4*minute)
	if want := (BanArgs{"3", "60000000", "60000000", "240000000"}); b.Args != want {
		t.Errorf("Args = %v, want %v", b.Args, want)
	}
	for level, want := range map[int64]int64{1: minute, 2: 2 * minute, 3: 4 * minute, 4: 4 * minute, 1 << 40: 4 * minute} {
		if got := b.Length(level); got != want {
			t.Errorf("Length(%d) = %d, want %d", level, got, want)
		}
	}
	// A Max that is no power of two times For caps the last doubling.
	if got := NewBan(1, minute, minute, 3*minute).Length(3); got != 3*minute {
		t.Errorf("Length(3) with Max 3m = %d, want %d", got, 3*minute)
	}
	set := NewSet([]Limit{Compile(FixedWindow, 10, time.Minute, 0, 0)}).WithBan(b)
	if set.Ban != b || set.Share(2).Ban != b {
		t.Errorf("the ban of a set or of its share: got %p and %p, want %p", set.Ban, set.Share(2).Ban, b)
	}
	for _, l := range []Limit{Compile(FixedWindow, 1, time.Millisecond, 0, 0), Compile(SlidingLog, 1, time.Second, 0, 0), Compile(SlidingWindow, 10, time.Second, time.Second, 0), Compile(TokenBucket, 1, time.Second, 0, 1)} {
		if l.Suffix == BanSuffix {
			t.Errorf("the limit %+v has the ban's suffix %q", l, BanSuffix)
		}
		if strings.HasPrefix(l.Suffix, ChargeSuffix) {
			t.Errorf("the limit %+v has a suffix starting as a charge's, %q", l, ChargeSuffix)
		}
	}
}
