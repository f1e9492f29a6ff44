package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// The tests of Store.Peek: it answers as Allow would, and changes nothing.

// peek asks for a request's answer without deciding it, and fails t on an
// error or a broken invariant.
func peek(t *testing.T, s ratelimit.Store, key string, cost int, limits ...ratelimit.Limit) ratelimit.Decision {
	t.Helper()
	d, err := s.Peek(context.Background(), key, cost, limitsOf(t, limits...))
	if err != nil {
		t.Fatalf("Peek(%q, %d, %v): %v", key, cost, limits, err)
	}
	if msg := brokenAnswer(d, cost, limits, true); msg != "" {
		t.Fatalf("Peek(%q, %d, %v) = %+v: %s", key, cost, limits, d, msg)
	}
	return d
}

// testPeekChangesNothing replays randomized traffic with Peeks between the
// requests, of any cost and of either key (one with no state, at first):
// every Allow must answer as [Model] does when it never saw the Peeks. A
// second Model answers the Peeks too and must agree all the same:
// Model.Peek changes nothing either. The clock and the windows are as in
// testMatchesModel.
func testPeekChangesNothing(t *testing.T, h Harness) {
	s, r := newReplay(t, h)
	rng, peeked, c := r.rng, new(Model), r.c
	for round := range r.rounds / 2 { // half of MatchesModel's traffic: the peeks add as many calls again
		limits := randomLimits(rng, r.windows)
		keys := r.keys(round)
		for step := range r.steps {
			r.advance(limits)
			for range rng.IntN(3) {
				key, cost := keys[rng.IntN(len(keys))], randomCost(rng, limits)
				peek(t, s, key, cost, limits...)
				peeked.Peek(c.Now().UnixMicro(), key, cost, limits...)
			}
			key, cost := keys[rng.IntN(len(keys))], randomCost(rng, limits)
			_, want, now := r.allow(fmt.Sprintf("round %d step %d, after Peeks", round, step), s, key, cost, limits)
			if model := peeked.Allow(now, key, cost, limits...); !sameDecision(model, want, 0) {
				t.Fatalf("round %d step %d: %v cost %d: a Model that answered the Peeks decides\n%+v\nwant %+v", round, step, limits, cost, model, want)
			}
		}
	}
}

// testPeekMatchesModel replays randomized traffic, a Peek and then an
// Allow at each step, and wants every Peek to answer as [Model.Peek]
// does. The clock and the windows are as in testMatchesModel.
func testPeekMatchesModel(t *testing.T, h Harness) {
	s, r := newReplay(t, h)
	rng := r.rng
	for round := range r.rounds / 2 { // half of MatchesModel's traffic: the peeks add as many calls again
		limits := randomLimits(rng, r.windows)
		keys := r.keys(round)
		for step := range r.steps {
			r.advance(limits)
			key, cost := keys[rng.IntN(len(keys))], randomCost(rng, limits)
			r.step(fmt.Sprintf("round %d step %d: %v Peek cost %d", round, step, limits, cost),
				func() ratelimit.Decision { return peek(t, s, key, cost, limits...) },
				func(m *Model, now int64) ratelimit.Decision { return m.Peek(now, key, cost, limits...) })
			r.allow(fmt.Sprintf("round %d step %d", round, step), s, keys[rng.IntN(len(keys))], randomCost(rng, limits), limits)
		}
	}
}

// testPeekAgreesWithAllow peeks at each request of randomized traffic and
// then sends it, at the same instant: the Peek foretells the decision, its
// RetryAfter when denied, and its Remaining, which is cost more than the
// Allow's when allowed (taken) and the same when denied (a denial takes
// nothing; and then ResetAfter is the same too).
func testPeekAgreesWithAllow(t *testing.T, h Harness) {
	s, c := h.one(t)
	if !c.Pinned() {
		t.Skip("needs a pinned clock: the Peek and the Allow must see the same instant")
	}
	rng := newRand(t)
	windows := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, time.Second}
	for round := range traffic(30) {
		limits := randomLimits(rng, windows)
		key := uniqueKey(t, string(rune('a'+round%26)))
		for step := range 100 {
			c.Advance(randomAdvance(rng, limits))
			cost := randomCost(rng, limits)
			p := peek(t, s, key, cost, limits...)
			a := allow(t, s, key, cost, limits...)
			if p.Allowed != a.Allowed || p.RetryAfter != a.RetryAfter {
				t.Fatalf("round %d step %d: %v cost %d: Peek said allowed %v retry after %v, Allow then %v %v:\npeek  %+v\nallow %+v",
					round, step, limits, cost, p.Allowed, p.RetryAfter, a.Allowed, a.RetryAfter, p, a)
			}
			for i, pr := range p.Results() {
				ar := a.Results()[i]
				remaining := ar.Remaining
				if a.Allowed {
					remaining += cost
				}
				if pr.Allowed != ar.Allowed || pr.RetryAfter != ar.RetryAfter || pr.Remaining != remaining || !a.Allowed && pr.ResetAfter != ar.ResetAfter {
					t.Fatalf("round %d step %d: %v cost %d: Results[%d]:\npeek  %+v\nallow %+v", round, step, limits, cost, i, pr, ar)
				}
			}
		}
	}
}

// testPeekInvalidInput checks that Peek refuses what Allow refuses, and
// that the refusals change nothing.
func testPeekInvalidInput(t *testing.T, h Harness) {
	s, _ := h.one(t)
	l := ratelimit.PerMinute(10)
	allow(t, s, "k", 3, l)
	refusesInvalid(t, s.Peek)
	if d := peek(t, s, "k", 7, l); !d.Allowed || d.Results()[0].Remaining != 7 {
		t.Errorf("a Peek of the rest of the quota after the refusals: got %+v, want allowed with 7 remaining", d)
	}
	if d := allow(t, s, "k", 7, l); !d.Allowed {
		t.Errorf("a request of the rest of the quota after the refusals: denied, want allowed")
	}
}
