package storetest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// The tests of bans (see ratelimit.Ban). Each builds its set of limits
// once and reuses it, as a Limiter does: a store may know a set by its
// pointer, as the Redis store's deny cache does, and these tests must see
// what it serves.

// withBan returns limits as a set with ban b, failing t if either is
// invalid.
var withBan = testkit.WithBan

// limitsIn returns the limits of set, in order.
func limitsIn(set *ratelimit.Limits) []ratelimit.Limit { return set.All() }

// allowSet decides one request under set and fails t on an error or a
// broken invariant.
func allowSet(t *testing.T, s ratelimit.Store, key string, cost int, set *ratelimit.Limits) ratelimit.Decision {
	t.Helper()
	d, err := s.Allow(context.Background(), key, cost, set)
	if err != nil {
		t.Fatalf("Allow(%q, %d, %v): %v", key, cost, limitsIn(set), err)
	}
	if msg := brokenAnswer(d, cost, limitsIn(set), false); msg != "" {
		t.Fatalf("Allow(%q, %d, %v) = %+v: %s", key, cost, limitsIn(set), d, msg)
	}
	return d
}

// peekSet is allowSet's Peek.
func peekSet(t *testing.T, s ratelimit.Store, key string, cost int, set *ratelimit.Limits) ratelimit.Decision {
	t.Helper()
	d, err := s.Peek(context.Background(), key, cost, set)
	if err != nil {
		t.Fatalf("Peek(%q, %d, %v): %v", key, cost, limitsIn(set), err)
	}
	if msg := brokenAnswer(d, cost, limitsIn(set), true); msg != "" {
		t.Fatalf("Peek(%q, %d, %v) = %+v: %s", key, cost, limitsIn(set), d, msg)
	}
	return d
}

// wantBanned fails t unless d is the answer to a key banned for exactly
// banned more, as a ban that started earlier gives it: every result's
// RetryAfter and ResetAfter are the ban's. Zero banned means any time in
// (0, within].
func wantBanned(t *testing.T, where string, d ratelimit.Decision, banned, within time.Duration) {
	t.Helper()
	if banned != 0 && d.Banned != banned || banned == 0 && (d.Banned <= 0 || d.Banned > within) {
		t.Fatalf("%s: got Banned %v, want %v (or within (0, %v]); %+v", where, d.Banned, banned, within, d)
	}
	for i, r := range d.Results() {
		if r.Allowed || r.Remaining != 0 || r.RetryAfter != d.Banned || r.ResetAfter != d.Banned {
			t.Errorf("%s: Results[%d] = %+v, want denied, 0 remaining, RetryAfter and ResetAfter the ban's %v", where, i, r, d.Banned)
		}
	}
}

// wantDenied fails t unless d is a denial by its limits, with no ban.
func wantDenied(t *testing.T, where string, d ratelimit.Decision) {
	t.Helper()
	if d.Allowed || d.Banned != 0 {
		t.Fatalf("%s: got allowed %v, Banned %v, want a denial by the limits and no ban; %+v", where, d.Allowed, d.Banned, d)
	}
}

// banAdvance is d, and realMargin more on a real clock, so that a step
// meant to land past an edge does.
func banAdvance(c Clock, d time.Duration) {
	if !c.Pinned() {
		d += realMargin
	}
	c.Advance(d)
}

// banStep is one request of testBanExample, at a time from the start.
type banStep struct {
	at      time.Duration
	allowed bool
	banned  time.Duration // the Decision's Banned
	retry   time.Duration // when denied by the limit alone: its RetryAfter
}

// testBanExample is the ban's worked example: After 3 denials Within a
// minute, banned For a minute, doubling up to a Max of four, on a limit
// of 1 per 10s (a sliding log, for exact times). Bans of 1, 2, 4 and 4
// minutes, each starting less than Max after the last one ended (the
// third 1µs less); a quiet time of exactly Max, and the next is 1 minute
// again. Banned requests count no strike: after each ban, two denials do
// not ban, the third does. Then denials 30s apart: the third is exactly
// Within after the first, and starts the count afresh; allowed requests
// between them change nothing, and a third 1µs short of Within bans.
func testBanExample(t *testing.T, h Harness) {
	s, c := h.one(t)
	if !c.Pinned() {
		t.Skip("needs a pinned clock: the bans last minutes")
	}
	const sec, minute, µs = time.Second, time.Minute, time.Microsecond
	set := withBan(t, ratelimit.Ban{After: 3, Within: minute, For: minute, Max: 4 * minute},
		ratelimit.Limit{Quota: 1, Window: 10 * sec}.Using(ratelimit.SlidingLog))
	var steps []banStep
	// strikeOut is a request allowed at x-3s, and denials at x-2s, x-1s
	// and x, where the third bans for banned.
	strikeOut := func(x, banned time.Duration) {
		steps = append(steps,
			banStep{at: x - 3*sec, allowed: true},
			banStep{at: x - 2*sec, retry: 9 * sec},
			banStep{at: x - sec, retry: 8 * sec},
			banStep{at: x, banned: banned})
	}
	strikeOut(3*sec, minute) // banned until 63s
	steps = append(steps,
		banStep{at: 33 * sec, banned: 30 * sec},
		banStep{at: 63*sec - µs, banned: µs})
	strikeOut(66*sec, 2*minute)              // 3s after the end: level 2, until 186s
	strikeOut(186*sec+4*minute-µs, 4*minute) // 1µs short of Max after the end: level 3
	third := 186*sec + 8*minute - µs         // the end of the third ban
	strikeOut(third+3*sec, 4*minute)         // level 4, at most Max
	end := third + 3*sec + 4*minute          // the end of the fourth ban
	strikeOut(end+4*minute, minute)          // exactly Max after it: level 1
	base := end + 5*minute + sec             // the fifth ban ended 1s ago
	for i := range 5 {                       // denials 30s apart: s = 1, 2, 1, 2, 1
		at := base + time.Duration(i)*30*sec
		steps = append(steps, banStep{at: at, allowed: true}, banStep{at: at + sec, retry: 9 * sec})
	}
	last := base + 4*30*sec + sec // the first strike of the count
	steps = append(steps,
		banStep{at: last + 29*sec, allowed: true},
		banStep{at: last + 30*sec, retry: 9 * sec},
		banStep{at: last + 59*sec, allowed: true},
		// The third strike, 1µs short of Within after the first: a ban,
		// about 3m after the fifth ended, so of level 2.
		banStep{at: last + minute - µs, banned: 2 * minute})

	key := uniqueKey(t, "k")
	var now time.Duration
	for i, st := range steps {
		c.Advance(st.at - now)
		now = st.at
		where := fmt.Sprintf("step %d (t=+%v)", i, st.at)
		d := allowSet(t, s, key, 1, set)
		switch {
		case st.allowed:
			if !d.Allowed || d.Banned != 0 || d.Results()[0].Remaining != 0 {
				t.Fatalf("%s: got %+v, want allowed with 0 remaining and no ban", where, d)
			}
		case st.banned != 0:
			wantBanned(t, where, d, st.banned, 0)
		default:
			wantDenied(t, where, d)
			if got := d.Results()[0].RetryAfter; got != st.retry {
				t.Fatalf("%s: RetryAfter = %v, want the limit's %v", where, got, st.retry)
			}
		}
	}
}

// testBanEachAlgorithm bans a key under each algorithm alone: the second
// denial within the hour bans it for exactly For, and the answer keeps
// the limit's longer times; while banned it is denied with the ban's
// times and counts no strike, so that once the ban is over one denial
// does not ban it and the next bans it for twice as long.
func testBanEachAlgorithm(t *testing.T, h Harness) {
	for _, a := range []ratelimit.Algorithm{ratelimit.SlidingWindow, ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.TokenBucket} {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			s, c := h.one(t)
			first := 200 * time.Millisecond
			if !c.Pinned() {
				first = 500 * time.Millisecond
			}
			// A ban Max of 8 bans: the second ban, twice the first, comes
			// within Max of the first's end however slowly a busy machine
			// sends the two requests between them.
			set := withBan(t, ratelimit.Ban{After: 2, Within: time.Hour, For: first, Max: 8 * first}, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(a))
			key := uniqueKey(t, "k")
			if d := allowSet(t, s, key, 1, set); !d.Allowed || d.Banned != 0 {
				t.Fatalf("first request: got %+v, want allowed", d)
			}
			denied := allowSet(t, s, key, 1, set)
			wantDenied(t, "the first denial", denied)
			d := allowSet(t, s, key, 1, set)
			if d.Banned != first {
				t.Fatalf("the second denial: got Banned %v, want %v; %+v", d.Banned, first, d)
			}
			// The limit's own wait, about an hour, is longer than the ban.
			if r := d.Results()[0]; r.RetryAfter <= first || c.Pinned() && r.RetryAfter != denied.Results()[0].RetryAfter {
				t.Errorf("the second denial: RetryAfter %v, want the limit's %v", r.RetryAfter, denied.Results()[0].RetryAfter)
			}
			wantBanned(t, "while banned", allowSet(t, s, key, 1, set), 0, first)
			banAdvance(c, first)
			wantDenied(t, "after the ban", allowSet(t, s, key, 1, set))
			if d := allowSet(t, s, key, 1, set); d.Banned != 2*first {
				t.Errorf("the second denial after the ban: got Banned %v, want %v; %+v", d.Banned, 2*first, d)
			}
		})
	}
}

// testBanMultiLimit bans a key whose request one limit denies while the
// other admits it: the ban's answer denies under both, with the ban's
// times where they are longer, and nothing was taken from either, before
// or during the ban. A ban whose Max is zero always lasts For.
func testBanMultiLimit(t *testing.T, h Harness) {
	s, c := h.one(t)
	first := 200 * time.Millisecond
	log, bucket := ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.SlidingLog), ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.TokenBucket)
	set := withBan(t, ratelimit.Ban{After: 1, Within: time.Hour, For: first}, log, bucket)
	key := uniqueKey(t, "k")
	if d := allowSet(t, s, key, 1, set); !d.Allowed || d.Results()[1].Remaining != 9 {
		t.Fatalf("first request: got %+v, want allowed with 9 left in the bucket", d)
	}
	d := allowSet(t, s, key, 1, set)
	if d.Banned != first {
		t.Fatalf("the first denial: got Banned %v, want %v; %+v", d.Banned, first, d)
	}
	// The bucket admitted it alone: its wait is the ban's, its reset its
	// own (6 minutes a token).
	if r := d.Results()[1]; r.RetryAfter != first || r.ResetAfter <= first {
		t.Errorf("the bucket's result in the ban's answer: %+v, want RetryAfter %v and its own ResetAfter", r, first)
	}
	wantBanned(t, "while banned", allowSet(t, s, key, 1, set), 0, first)
	banAdvance(c, first)
	p := peekSet(t, s, key, 1, set)
	if p.Allowed || p.Banned != 0 || p.Results()[0].Remaining != 0 || p.Results()[1].Remaining != 9 {
		t.Fatalf("a Peek after the ban: got %+v, want no ban, the log spent and 9 left in the bucket", p)
	}
	if d := allowSet(t, s, key, 1, set); d.Banned != first {
		t.Errorf("the next denial: got Banned %v, want %v again (Max zero: every ban lasts For); %+v", d.Banned, first, d)
	}
}

// testBanPeek checks that a Peek sees a ban and changes nothing: Peeks
// between two denials count no strike, so the second denial starts the
// ban (its answer shows the limit's wait, longer than the ban), and Peeks
// during the ban count none either, so that after it one denial does not
// ban again.
func testBanPeek(t *testing.T, h Harness) {
	s, c := h.one(t)
	first := 200 * time.Millisecond
	set := withBan(t, ratelimit.Ban{After: 2, Within: time.Hour, For: first}, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow))
	key := uniqueKey(t, "k")
	if p := peekSet(t, s, uniqueKey(t, "fresh"), 1, set); !p.Allowed || p.Banned != 0 {
		t.Errorf("a Peek of a key without state: got %+v, want allowed", p)
	}
	allowSet(t, s, key, 1, set)
	wantDenied(t, "the first denial", allowSet(t, s, key, 1, set))
	for i := range 3 {
		wantDenied(t, fmt.Sprintf("Peek %d after one denial", i), peekSet(t, s, key, 1, set))
		c.Advance(time.Millisecond)
	}
	d := allowSet(t, s, key, 1, set)
	if d.Banned != first || d.Results()[0].RetryAfter <= first {
		t.Fatalf("the second denial: got %+v, want the start of a ban of %v, with the limit's RetryAfter", d, first)
	}
	c.Advance(time.Millisecond)
	p := peekSet(t, s, key, 1, set)
	if c.Pinned() {
		wantBanned(t, "a Peek while banned", p, first-time.Millisecond, 0)
	} else {
		wantBanned(t, "a Peek while banned", p, 0, first)
	}
	for i := range 3 {
		wantBanned(t, fmt.Sprintf("Peek %d while banned", i), peekSet(t, s, key, 1, set), 0, first)
	}
	banAdvance(c, first)
	wantDenied(t, "a Peek after the ban", peekSet(t, s, key, 1, set))
	wantDenied(t, "the first denial after the ban", allowSet(t, s, key, 1, set))
}

// testBanReset checks that Reset forgets a key's ban, its strikes and its
// level, even under limits without a ban: a key has one ban state.
func testBanReset(t *testing.T, h Harness) {
	s, _ := h.one(t)
	l := ratelimit.Limit{Quota: 1, Window: time.Hour}
	set := withBan(t, ratelimit.Ban{After: 2, Within: time.Hour, For: time.Hour, Max: 4 * time.Hour}, l)
	key := uniqueKey(t, "k")
	reset := func(limits *ratelimit.Limits) {
		t.Helper()
		if err := s.Reset(context.Background(), key, limits); err != nil {
			t.Fatalf("Reset: %v", err)
		}
	}
	allowSet(t, s, key, 1, set)
	allowSet(t, s, key, 1, set)
	if d := allowSet(t, s, key, 1, set); d.Banned != time.Hour {
		t.Fatalf("the second denial: got Banned %v, want 1h", d.Banned)
	}
	reset(set)
	if d := allowSet(t, s, key, 1, set); !d.Allowed {
		t.Fatalf("after Reset: got %+v, want allowed", d)
	}
	wantDenied(t, "a denial after Reset", allowSet(t, s, key, 1, set))
	reset(set) // forgets that strike
	allowSet(t, s, key, 1, set)
	wantDenied(t, "a denial after the second Reset", allowSet(t, s, key, 1, set))
	// Had Reset kept the ban's end, this ban would be of level 2.
	if d := allowSet(t, s, key, 1, set); d.Banned != time.Hour {
		t.Fatalf("the second denial after Reset: got Banned %v, want a first ban of 1h", d.Banned)
	}
	reset(limitsOf(t, l)) // the same limit without a ban
	if d := allowSet(t, s, key, 1, set); !d.Allowed {
		t.Fatalf("after a Reset under limits without a ban: got %+v, want allowed", d)
	}
}

// randomBan returns a valid ban: After from 1 to 4, Within one of
// windows, For one of lengths, and Max zero, a few times For, or one of
// windows if longer.
func randomBan(rng *rand.Rand, lengths, windows []time.Duration) ratelimit.Ban {
	b := ratelimit.Ban{After: 1 + rng.IntN(4), Within: windows[rng.IntN(len(windows))], For: lengths[rng.IntN(len(lengths))]}
	switch rng.IntN(3) {
	case 1:
		b.Max = b.For * time.Duration(1+rng.IntN(8))
	case 2:
		b.Max = max(b.For, windows[rng.IntN(len(windows))])
	}
	return b
}

// testBanMatchesModel replays randomized traffic under random limits and
// bans through the store and through [Model], with a Peek before one
// request in three, and wants the same answers, Banned included. A pinned
// clock often lands exactly on an edge of a ban: its end, Within after the
// first strike, Max after the last ban. Windows and tolerance are as in
// testMatchesModel, with less traffic.
func testBanMatchesModel(t *testing.T, h Harness) {
	s, c := h.one(t)
	rng := newRand(t)
	windows, _, _, tolerance := modelTraffic(c)
	lengths, rounds, steps := []time.Duration{time.Hour, 2 * time.Hour}, 6, 30
	if c.Pinned() {
		lengths, rounds, steps = windows[:3], 10, 60
	}
	r := &replay{t: t, c: c, m: new(Model), tolerance: tolerance}
	m := r.m
	for round := range rounds {
		limits := randomLimits(rng, windows)
		ban := randomBan(rng, lengths, windows)
		set := withBan(t, ban, limits...)
		m.SetBan(ban)
		keys := []string{uniqueKey(t, fmt.Sprint(round, "a")), uniqueKey(t, fmt.Sprint(round, "b"))}
		longest := cmp.Or(ban.Max, ban.For)
		for step := range steps {
			key := keys[rng.IntN(len(keys))]
			if c.Pinned() {
				// Often to an edge of the key's ban state, as the Model
				// has it: where the ban ends, where the count of strikes
				// starts afresh, where the next ban is of level 1 again.
				now, edge := c.Now().UnixMicro(), int64(0)
				if b := m.bans[key]; b != nil && rng.IntN(2) == 0 {
					edge = []int64{b.ends, b.first + int64(ban.Within/time.Microsecond), b.ends + int64(longest/time.Microsecond)}[rng.IntN(3)]
				}
				if edge > now {
					c.Advance(time.Duration(edge-now) * time.Microsecond)
				} else {
					c.Advance(randomAdvance(rng, limits))
				}
			}
			if rng.IntN(3) == 0 {
				cost := randomCost(rng, limits)
				r.step(fmt.Sprintf("round %d step %d: %v, %v: Peek cost %d", round, step, limits, ban, cost),
					func() ratelimit.Decision { return peekSet(t, s, key, cost, set) },
					func(m *Model, now int64) ratelimit.Decision { return m.Peek(now, key, cost, limits...) })
			}
			cost := randomCost(rng, limits)
			r.step(fmt.Sprintf("round %d step %d: %v, %v: cost %d", round, step, limits, ban, cost),
				func() ratelimit.Decision { return allowSet(t, s, key, cost, set) },
				func(m *Model, now int64) ratelimit.Decision { return m.Allow(now, key, cost, limits...) })
		}
	}
}
