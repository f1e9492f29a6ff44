package storetest

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// newRand returns a generator seeded from the test's name, so a failure
// replays the same traffic.
func newRand(t *testing.T) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	seed := h.Sum64()
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed>>1|1))
}

// randomLimits returns one to three valid limits that do not share
// state, with windows drawn from windows (each a multiple of 20ms), or
// calendar periods.
func randomLimits(rng *rand.Rand, windows []time.Duration) []ratelimit.Limit {
	var limits []ratelimit.Limit
	for n := 1 + rng.IntN(3); len(limits) < n; {
		l := ratelimit.Limit{
			Algorithm: ratelimit.Algorithm(rng.IntN(7)),
			Quota:     1 + rng.IntN(12),
			Window:    windows[rng.IntN(len(windows))],
		}
		switch l.Algorithm {
		case ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly:
			l.Window = 0
			l.Zone = []string{"", "UTC", "Europe/Paris", "Asia/Kathmandu", "America/New_York"}[rng.IntN(5)]
			if l.Algorithm == ratelimit.Weekly {
				l.Weekday = time.Weekday(rng.IntN(7))
			}
		case ratelimit.TokenBucket:
			if rng.IntN(2) == 0 {
				l.Burst = 1 + rng.IntN(15)
			}
		case ratelimit.SlidingWindow:
			slots := []time.Duration{1, 2, 4, 5, 10}[rng.IntN(5)]
			l.Precision = l.Window / slots
		}
		if _, err := ratelimit.NewLimits(append(limits, l)...); err == nil {
			limits = append(limits, l)
		}
	}
	return limits
}

// withFixedCosts gives some of limits a Cost: every request takes as
// much from them, whatever its own.
func withFixedCosts(rng *rand.Rand, limits []ratelimit.Limit) []ratelimit.Limit {
	for i := range limits {
		if rng.IntN(5) == 0 {
			limits[i].Cost = 1 + rng.IntN(capacity(withDefaults(limits[i])))
		}
	}
	return limits
}

// randomCost returns a cost that every limit can hold, usually 1.
func randomCost(rng *rand.Rand, limits []ratelimit.Limit) int {
	if rng.IntN(3) > 0 {
		return 1
	}
	most := capacity(limits[0])
	for _, l := range limits {
		most = min(most, capacity(l))
	}
	return 1 + rng.IntN(most)
}

// randomAdvance returns a step of time: often none, sometimes a few
// microseconds, sometimes exactly a window or a slot, sometimes up to a
// little more than the longest window (for a calendar, 3 hours).
func randomAdvance(rng *rand.Rand, limits []ratelimit.Limit) time.Duration {
	longest := time.Duration(0)
	for _, l := range limits {
		longest = max(longest, l.Window)
		if isCalendar(l) {
			longest = max(longest, 3*time.Hour) // to cross a day's end now and then
		}
	}
	switch rng.IntN(7) {
	case 0, 1:
		return 0
	case 6:
		// Exactly a window, or a slot, to land on the edges.
		l := withDefaults(limits[rng.IntN(len(limits))])
		if l.Algorithm == ratelimit.SlidingWindow && rng.IntN(2) == 0 {
			return l.Precision
		}
		return l.Window
	case 2:
		return time.Duration(1+rng.IntN(1500)) * time.Microsecond
	case 3:
		return time.Duration(rng.Int64N(int64(longest / 4))).Truncate(time.Microsecond) // stores keep microseconds
	default:
		return time.Duration(rng.Int64N(int64(longest * 6 / 5))).Truncate(time.Microsecond)
	}
}

// testInvariants sends randomized traffic and checks what must hold for
// every decision (see brokenInvariant), and that a denied request takes
// nothing: repeated at once, it sees the same state (with a real clock,
// no less Remaining).
func testInvariants(t *testing.T, h Harness) {
	s, c := h.one(t)
	rng := newRand(t)
	windows := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, time.Second}
	rounds, steps := traffic(30), 100
	if !c.Pinned() {
		rounds, steps = traffic(10), 60
	}
	for round := range rounds {
		limits := randomLimits(rng, windows)
		key := uniqueKey(t, string(rune('a'+round%26)))
		for range steps {
			if c.Pinned() {
				c.Advance(randomAdvance(rng, limits))
			} else if rng.IntN(8) == 0 {
				c.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
			}
			cost := randomCost(rng, limits)
			d := allow(t, s, key, cost, limits...)
			if d.Allowed {
				continue
			}
			again := allow(t, s, key, cost, limits...)
			if c.Pinned() {
				if !reflect.DeepEqual(again, d) {
					t.Fatalf("a denied request changed the state: %v cost %d:\nfirst  %+v\nsecond %+v", limits, cost, d, again)
				}
				continue
			}
			for i, r := range again.Results() {
				before := d.Results()[i].Remaining
				if after := r.Remaining + map[bool]int{true: cost}[again.Allowed]; after < before {
					t.Fatalf("a denied request took from %v: Remaining %d before, %d after", r.Limit, before, after)
				}
			}
		}
	}
}

// testMatchesModel replays randomized traffic through the store and
// through [Model] and wants the same decisions. With a pinned clock every
// field must match exactly. With a real clock the windows are days long,
// so that the few milliseconds between the store's clock and the model's
// change no count; only the durations may differ, by under a second.
func testMatchesModel(t *testing.T, h Harness) {
	s, r := newReplay(t, h)
	rng := r.rng
	for round := range r.rounds {
		limits := withFixedCosts(rng, randomLimits(rng, r.windows))
		keys := r.keys(round)
		for step := range r.steps {
			r.advance(limits)
			r.allow(fmt.Sprintf("round %d step %d", round, step), s, keys[rng.IntN(len(keys))], randomCost(rng, limits), limits)
		}
	}
}

// modelTraffic returns the windows, rounds and steps of the tests that
// replay traffic through a store and a Model, and the tolerance of their
// durations: exact with a pinned clock; with a real one, windows days
// long, so that the few milliseconds between the store's clock and the
// model's change no count, and durations within a second.
func modelTraffic(c Clock) (windows []time.Duration, rounds, steps int, tolerance time.Duration) {
	if !c.Pinned() {
		return []time.Duration{24 * time.Hour, 48 * time.Hour}, traffic(20), 40, time.Second
	}
	return []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second, time.Minute}, traffic(60), 120, 0
}

// A replay holds a store's answers to a [Model]'s, call by call (see
// [replay.step]), over randomized traffic: rounds of steps, each round
// under random limits of the windows modelTraffic gives.
type replay struct {
	t             *testing.T
	c             Clock
	m             *Model
	tolerance     time.Duration // of durations, as modelTraffic gives it
	rng           *rand.Rand
	windows       []time.Duration
	rounds, steps int
}

// newReplay returns one of h's stores and a replay of traffic through it.
func newReplay(t *testing.T, h Harness) (ratelimit.Store, *replay) {
	s, c := h.one(t)
	windows, rounds, steps, tolerance := modelTraffic(c)
	return s, &replay{t: t, c: c, m: new(Model), tolerance: tolerance, rng: newRand(t), windows: windows, rounds: rounds, steps: steps}
}

// keys returns the two keys of a round.
func (r *replay) keys(round int) []string {
	name := string(rune('a' + round%26))
	return []string{uniqueKey(r.t, name+"1"), uniqueKey(r.t, name+"2")}
}

// allow replays an Allow of key at cost under limits through s and the
// Model, as step does; what says where in the traffic it is.
func (r *replay) allow(what string, s ratelimit.Store, key string, cost int, limits []ratelimit.Limit) (got, want ratelimit.Decision, now int64) {
	return r.step(fmt.Sprintf("%s: %v cost %d", what, limits, cost),
		func() ratelimit.Decision { return allow(r.t, s, key, cost, limits...) },
		func(m *Model, now int64) ratelimit.Decision { return m.Allow(now, key, cost, limits...) })
}

// advance moves a pinned clock on by a random step for limits; a real
// clock moves by itself.
func (r *replay) advance(limits []ratelimit.Limit) {
	if r.c.Pinned() {
		r.c.Advance(randomAdvance(r.rng, limits))
	}
}

// step makes one call to the store and the same call to the Model, and
// fails the test, naming the call as what, unless they answer alike. On a
// pinned clock the Model answers at the clock's time. On a real one the
// store decided at some instant between the times read before and after
// its call, and a window or slot may end in between: the Model answers at
// after or, failing that, at before, keeps the state of whichever answer
// matches, and durations may differ by the tolerance plus the time the
// call took. step returns both answers and the time the Model's is for.
func (r *replay) step(what string, store func() ratelimit.Decision, model func(m *Model, now int64) ratelimit.Decision) (got, want ratelimit.Decision, now int64) {
	r.t.Helper()
	before := r.c.Now()
	got = store()
	if r.c.Pinned() {
		now = before.UnixMicro()
		if want = model(r.m, now); !sameDecision(got, want, r.tolerance) {
			r.t.Fatalf("%s:\ngot  %+v\nwant %+v", what, got, want)
		}
		return got, want, now
	}
	after := r.c.Now()
	tolerance := r.tolerance + after.Sub(before)
	var first ratelimit.Decision
	for i, at := range []time.Time{after, before} {
		m := r.m.clone()
		if want = model(m, at.UnixMicro()); sameDecision(got, want, tolerance) {
			*r.m = *m
			return got, want, at.UnixMicro()
		}
		if i == 0 {
			first = want
		}
	}
	r.t.Fatalf("%s, between %v and %v:\ngot  %+v\nwant %+v (at the end)\nor   %+v (at the start)", what, before, after, got, first, want)
	return got, want, 0
}

// sameDecision compares decisions, durations within tolerance.
func sameDecision(got, want ratelimit.Decision, tolerance time.Duration) bool {
	near := func(a, b time.Duration) bool { return a-b <= tolerance && b-a <= tolerance }
	if got.Allowed != want.Allowed || len(got.Results()) != len(want.Results()) || !near(got.Banned, want.Banned) || (got.Banned > 0) != (want.Banned > 0) {
		return false
	}
	for i, g := range got.Results() {
		w := want.Results()[i]
		if g.Limit != w.Limit || g.Allowed != w.Allowed || g.Remaining != w.Remaining ||
			!near(g.ResetAfter, w.ResetAfter) || !near(g.RetryAfter, w.RetryAfter) || !near(g.Window, w.Window) {
			return false
		}
	}
	return true
}

// testSlidingWindowBound checks the sliding window counter's documented
// bound. With window W and precision p it never admits more than Quota in
// any span of W−p: the test replays every request it admits through a
// sliding log of window W−p, which must admit them all. Across a full
// span of W it may admit up to one slot's worth more; the test measures
// the excess against a sliding log of window W fed the same traffic, and
// shows that the worst case, 2×Quota, is reachable.
func testSlidingWindowBound(t *testing.T, h Harness) {
	s, c := h.one(t)
	if !c.Pinned() {
		// The replay must happen at the same instants, which only a
		// pinned clock gives.
		t.Skip("needs a pinned clock")
	}
	const quota = 20
	window, precision := time.Second, 100*time.Millisecond
	counter := ratelimit.Limit{Quota: quota, Window: window, Precision: precision}
	shorter := ratelimit.Limit{Quota: quota, Window: window - precision}.Using(ratelimit.SlidingLog)
	exact := ratelimit.Limit{Quota: quota, Window: window}.Using(ratelimit.SlidingLog)

	t.Run("random traffic", func(t *testing.T) {
		rng := newRand(t)
		var admitted []int64 // microsecond of each admitted unit
		counterPassed, exactPassed := 0, 0
		for range traffic(4000) {
			c.Advance(time.Duration(rng.IntN(60_000)) * time.Microsecond)
			cost := 1 + rng.IntN(3)
			if rng.IntN(4) > 0 {
				cost = 1
			}
			if allow(t, s, uniqueKey(t, "exact"), cost, exact).Allowed {
				exactPassed += cost
			}
			if !allow(t, s, uniqueKey(t, "counter"), cost, counter).Allowed {
				continue
			}
			counterPassed += cost
			now := c.Now().UnixMicro()
			for range cost {
				admitted = append(admitted, now)
			}
			if d := allow(t, s, uniqueKey(t, "shorter"), cost, shorter); !d.Allowed {
				t.Fatalf("at %v the counter admitted cost %d, but a sliding log of %v denies it: more than %d in a span of W-p", c.Now(), cost, window-precision, quota)
			}
		}
		worst, slot := maxInSpan(admitted, int64(window/time.Microsecond)), maxInSlot(admitted, int64(precision/time.Microsecond))
		if worst > quota+slot {
			t.Errorf("%d admitted within one window, more than quota %d + the largest slot %d", worst, quota, slot)
		}
		t.Logf("same traffic: sliding window counter admitted %d, exact sliding log %d; most in any span of W: %d (quota %d, largest slot %d)",
			counterPassed, exactPassed, worst, quota, slot)
	})

	t.Run("worst case", func(t *testing.T) {
		// Spend the whole quota at the end of one slot, then again as soon
		// as that slot leaves the window: 2×Quota within W−p+1ms.
		key := uniqueKey(t, "k")
		into := time.Duration(c.Now().UnixMicro()%int64(precision/time.Microsecond)) * time.Microsecond
		c.Advance((2*precision - time.Millisecond - into) % precision)
		if d := allow(t, s, key, quota, counter); !d.Allowed {
			t.Fatalf("first burst denied: %+v", d)
		}
		c.Advance(window - precision + time.Millisecond)
		if d := allow(t, s, key, quota, counter); !d.Allowed {
			t.Fatalf("second burst, %v later, denied: %+v", window-precision+time.Millisecond, d)
		}
	})
}

// maxInSpan returns the most timestamps in any half-open span (t-w, t].
func maxInSpan(ts []int64, w int64) int {
	most, first := 0, 0
	for i, t := range ts {
		for ts[first] <= t-w {
			first++
		}
		most = max(most, i-first+1)
	}
	return most
}

// maxInSlot returns the most timestamps in one slot of width w.
func maxInSlot(ts []int64, w int64) int {
	counts := map[int64]int{}
	most := 0
	for _, t := range ts {
		counts[t/w]++
		most = max(most, counts[t/w])
	}
	return most
}

// testOverridesMatchModel replays traffic as testMatchesModel does, but
// each request's limits have their quotas changed at random, as runtime
// overrides change them (package admin): a quota raised or lowered, a
// bucket's burst with it. What was counted stays counted, and the new
// quota applies to what remains, as the Model says; a token bucket's
// state is per rate, so a new quota is a new bucket.
func testOverridesMatchModel(t *testing.T, h Harness) {
	s, r := newReplay(t, h)
	rng := r.rng
	for round := range max(r.rounds/3, 1) {
		limits := withFixedCosts(rng, randomLimits(rng, r.windows))
		keys := r.keys(round)
		for step := range r.steps {
			r.advance(limits)
			overridden := overrideQuotas(rng, limits)
			r.allow(fmt.Sprintf("round %d step %d, overridden", round, step), s, keys[rng.IntN(len(keys))], randomCost(rng, overridden), overridden)
		}
	}
}

// overrideQuotas returns limits with each quota, at random, kept, halved
// or doubled, as an override would change it, and a bucket's burst
// scaled with its quota; a limit that could not take its new quota keeps
// its own.
func overrideQuotas(rng *rand.Rand, limits []ratelimit.Limit) []ratelimit.Limit {
	out := slices.Clone(limits)
	for i, l := range out {
		o := l
		switch rng.IntN(3) {
		case 1:
			o.Quota = max(l.Quota/2, 1)
		case 2:
			o.Quota = l.Quota * 2
		}
		if o.Burst != 0 {
			o.Burst = max(o.Burst*o.Quota/l.Quota, 1)
		}
		try := slices.Clone(out)
		try[i] = o
		if _, err := ratelimit.NewLimits(try...); err == nil {
			out[i] = o
		}
	}
	return out
}
