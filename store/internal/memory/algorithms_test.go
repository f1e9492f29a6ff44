package memory

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
)

// TestMemoryTakeIsTheSteps holds each algorithm's take, the one-limit
// path, to the steps the multi-limit path takes on the same state: check,
// then commit when the cost fits or settle when not, then effective. The
// answers and the states must be the same, through random gaps and
// costs, on a state shared by two limits whose keys would share it too.
func TestMemoryTakeIsTheSteps(t *testing.T) {
	t.Parallel()
	windows := []time.Duration{time.Millisecond, 20 * time.Millisecond, time.Second, time.Minute}
	for _, name := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(11, uint64(len(name))))
			for round := range traffic(200) {
				l := ratelimit.Limit{Algorithm: algorithmNamed(t, name), Quota: 1 + rng.IntN(20), Window: windows[rng.IntN(len(windows))]}
				if l.Algorithm == ratelimit.SlidingWindow && rng.IntN(2) == 0 {
					l.Precision = l.Window / 2
				}
				other := l // shares the state: another quota, or a token bucket's burst
				if other.Algorithm == ratelimit.TokenBucket {
					l.Burst, other.Burst = 1+rng.IntN(20), 1+rng.IntN(20)
				} else {
					other.Quota = 1 + rng.IntN(20)
				}
				cs := []*compiled{&limitset.Compile(limitsOf(t, l)).Limits[0], &limitset.Compile(limitsOf(t, other)).Limits[0]}
				if cs[0].Suffix != cs[1].Suffix {
					t.Fatalf("%v and %v: suffixes %q and %q, want one state", l, other, cs[0].Suffix, cs[1].Suffix)
				}
				var fused, steps state
				fused.reset(cs[0])
				steps.reset(cs[0])
				now := epoch.UnixMicro()
				for i := range 60 {
					c := cs[rng.IntN(2)]
					switch rng.IntN(4) {
					case 0: // the same µs
					case 1:
						now += 1 + rng.Int64N(c.Window/c.Quota+1)
					case 2:
						now += 1 + rng.Int64N(c.Window)
					default:
						now += 1 + rng.Int64N(3*c.Window)
					}
					cost := 1 + rng.Int64N(c.Capacity)
					var got, want [5]int64 // ok, remaining, reset, retry, window
					ok, remaining, reset, retry, window := fused.take(c, now, cost)
					got = [5]int64{b2i(ok), remaining, reset, retry, window}
					a := steps.of(c)
					ok, remaining, retry = a.check(c, now, cost)
					if ok {
						reset = a.commit(c, now, cost)
						remaining -= cost
					} else {
						reset = a.settle(c, now)
					}
					want = [5]int64{b2i(ok), remaining, reset, retry, a.effective(c, now)}
					if got != want {
						t.Fatalf("round %d, step %d, %v, cost %d: got [ok remaining reset retry window] %v, want %v", round, i, c.Suffix, cost, got, want)
					}
					if !reflect.DeepEqual(fused, steps) {
						t.Fatalf("round %d, step %d, %v, cost %d: got state %+v, want %+v", round, i, c.Suffix, cost, fused, steps)
					}
				}
			}
		})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
