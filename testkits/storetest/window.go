package storetest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// testEffectiveWindow checks the promise of every Result's Window (the t
// of the RateLimit header): from the decision, within Window, the limit
// admits at most Remaining more units, whatever the key sends. Randomized
// traffic of Allows and Peeks, under one to three limits of any
// algorithms, goes through the store; after every answer, for each limit:
//
//   - With a pinned clock, a copy of [Model] in the same state is sent the
//     traffic that gets the next unit soonest, Remaining units at once and
//     then one more as early as it passes (found by bisection, so no
//     formula of the store's is trusted). Window must not be longer than
//     that time: the promise holds against any traffic. Nor shorter: it is
//     exact, but for the fixed window, whose expiry Redis keeps to the
//     millisecond, which may make it up to 1ms short. The traffic that
//     follows must keep every promise made so far too.
//   - With a real clock, the store itself is sent that traffic at once,
//     under that limit alone: Remaining units, then one. The extra unit
//     must be denied until Window has passed since the answer, and its
//     RetryAfter must not end before Window does; the times are bounded
//     by the moments the calls were made and returned, so a slow machine
//     cannot fail the test.
func testEffectiveWindow(t *testing.T, h Harness) {
	s, c := h.one(t)
	rng := newRand(t)
	if !c.Pinned() {
		testEffectiveWindowLive(t, s, c, rng)
		return
	}
	windows, rounds, steps, _ := modelTraffic(c)
	for round := range rounds {
		limits := randomLimits(rng, windows)
		key := uniqueKey(t, string(rune('a'+round%26)))
		var m Model
		var promises []promise
		for step := range steps {
			c.Advance(randomAdvance(rng, limits))
			now, cost := c.Now().UnixMicro(), randomCost(rng, limits)
			var got ratelimit.Decision
			if rng.IntN(4) == 0 {
				got = peek(t, s, key, cost, limits...)
				m.Peek(now, key, cost, limits...)
			} else {
				got = allow(t, s, key, cost, limits...)
				if want := m.Allow(now, key, cost, limits...); want.Allowed != got.Allowed {
					t.Fatalf("round %d step %d: %v cost %d: the store and the Model disagree:\nstore %+v\nmodel %+v", round, step, limits, cost, got, want)
				}
				if got.Allowed {
					for i := range promises {
						if p := &promises[i]; now < p.until {
							if p.left -= cost; p.left < 0 {
								t.Fatalf("round %d step %d: %v: the answer at %dµs promised at most %d more units under %v within %v; this request (cost %d) is one too many",
									round, step, limits, p.at, p.remaining, p.limit, us(p.until-p.at), cost)
							}
						}
					}
				}
			}
			for i, r := range got.Results() {
				l := limits[i]
				soonest := nextUnit(t, &m, now, key, r.Remaining, l)
				if r.Window > soonest {
					t.Fatalf("round %d step %d: %v cost %d: %+v: Window %v, but a unit beyond Remaining %d passes %v after the answer",
						round, step, limits, cost, r, r.Window, r.Remaining, soonest)
				}
				slack := time.Duration(0)
				if l.Algorithm == ratelimit.FixedWindow {
					slack = time.Millisecond
				}
				if r.Window+slack < soonest {
					t.Fatalf("round %d step %d: %v cost %d: %+v: Window %v, shorter than it must be: no unit beyond Remaining %d passes for %v",
						round, step, limits, cost, r, r.Window, r.Remaining, soonest)
				}
				promises = append(promises, promise{limit: l, at: now, until: now + int64(r.Window/time.Microsecond), remaining: r.Remaining, left: r.Remaining})
			}
		}
	}
}

// promise is what an answer said of one limit: within [at, until), at
// most remaining more units; left is what the traffic since has left of
// them.
type promise struct {
	limit           ratelimit.Limit
	at, until       int64 // µs
	remaining, left int
}

// nextUnit returns how soon after now the limit l admits a unit beyond the
// remaining ones that key may spend now, on a copy of m: spend them all
// at now, then find by bisection the first microsecond at which one more
// passes. It fails t when the remaining units do not pass at now: then
// Remaining said more than the limit holds.
func nextUnit(t *testing.T, m *Model, now int64, key string, remaining int, l ratelimit.Limit) time.Duration {
	t.Helper()
	c := m.clone()
	if remaining > 0 {
		if d := c.Allow(now, key, remaining, l); !d.Allowed {
			t.Fatalf("%v: Remaining %d, but the Model denies them at once: %+v", l, remaining, d)
		}
	}
	lo, hi := int64(0), int64(maxWindow(l)/time.Microsecond)
	if !c.Peek(now+hi, key, 1, l).Allowed {
		t.Fatalf("%v: no unit passes %v after spending Remaining %d", l, us(hi), remaining)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if c.Peek(now+mid, key, 1, l).Allowed {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return us(lo)
}

// testEffectiveWindowLive is testEffectiveWindow on a real clock.
func testEffectiveWindowLive(t *testing.T, s ratelimit.Store, c Clock, rng *rand.Rand) {
	windows := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second, 2 * time.Second}
	checked := map[ratelimit.Algorithm]int{}
	for round := range 16 {
		limits := randomLimits(rng, windows)
		key := uniqueKey(t, string(rune('a'+round%26))+string(rune('0'+round/26)))
		for range 40 {
			if rng.IntN(6) == 0 {
				c.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
			}
			cost := randomCost(rng, limits)
			start := time.Now()
			var d ratelimit.Decision
			if rng.IntN(4) == 0 {
				d = peek(t, s, key, cost, limits...)
			} else {
				d = allow(t, s, key, cost, limits...)
			}
			if rng.IntN(3) > 0 {
				continue
			}
			i := rng.IntN(len(limits))
			r, l := d.Results()[i], limits[i]
			if r.Remaining > 0 {
				if spent := allow(t, s, key, r.Remaining, l); !spent.Allowed {
					t.Fatalf("%v: the answer said Remaining %d, but spending them at once is denied: %+v", l, r.Remaining, spent)
				}
			}
			more := allow(t, s, key, 1, l)
			end := time.Now()
			// The answer came after start, the extra unit's before end.
			if more.Allowed && end.Sub(start) < r.Window {
				t.Fatalf("%v: the answer %+v promised at most %d more units within %v, and one more passed within %v",
					l, r, r.Remaining, r.Window, end.Sub(start))
			}
			if !more.Allowed {
				if unit := more.Results()[0].RetryAfter; end.Sub(start)+unit < r.Window {
					t.Fatalf("%v: the answer %+v promised at most %d more units within %v, and one more may pass %v after the answer",
						l, r, r.Remaining, r.Window, end.Sub(start)+unit)
				}
			}
			checked[l.Algorithm]++
		}
	}
	for a := range ratelimit.TokenBucket + 1 {
		if checked[a] == 0 {
			t.Errorf("no answer of a %v limit was checked", a)
		}
	}
	t.Logf("answers checked per algorithm: %v", checked)
}
