package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// The tests of holds: an admitted request reserves its cost under each
// limit charged from usage until End settles it, or until the hold
// lapses, 30s after it was made unless its store renews it.

// renewer is a store that renews the slots and holds of its requests in
// flight when told, as it does by itself every third of their life: on a
// pinned clock, where no renewal comes by itself, a test renews them so
// (the Memory store's RenewSlots).
type renewer interface{ RenewSlots() }

// holdLifeTime is how long a hold lasts unrenewed.
const holdLifeTime = time.Duration(holdLife) * time.Microsecond

// testReserveExample follows holds of a limit of 10 charged from usage:
// two requests of cost 4 in flight hold 8, so a third is denied, with 2
// left, told to retry in a second; ending the first with a usage of 1
// gives its 4 back and takes 1, and ending it again counts nothing. One
// id stands for a request's Concurrent slot and its hold. A quota changed
// by an override keeps the holds, and Reset forgets them. On a pinned
// clock, a hold lapses 30s after it was made, and a request then settled
// is charged its usage; renewed (when the store can be told to), it
// lasts 30s from the renewal, and a lapsed one is not revived.
func testReserveExample(t *testing.T, h Harness) {
	tokens := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 10, Window: time.Hour, Usage: true, Name: "tokens"}
	remaining := func(t *testing.T, where string, d ratelimit.Decision, want int) {
		t.Helper()
		if got := d.Results()[0].Remaining; got != want {
			t.Fatalf("%s: %d left of %v, want %d; %+v", where, got, tokens, want, d.Results())
		}
	}

	t.Run("settle", func(t *testing.T) {
		t.Parallel()
		s, _ := h.one(t)
		key := uniqueKey(t, "k")
		first, second := allow(t, s, key, 4, tokens), allow(t, s, key, 4, tokens)
		for i, d := range []ratelimit.Decision{first, second} {
			if !d.Allowed || d.Slot == "" {
				t.Fatalf("request %d of cost 4: allowed %v, id %q; want allowed with an id for its hold", i+1, d.Allowed, d.Slot)
			}
			remaining(t, fmt.Sprintf("request %d of cost 4", i+1), d, 6-4*i)
		}
		if first.Slot == second.Slot {
			t.Fatalf("two requests got the same id %q", first.Slot)
		}
		third := allow(t, s, key, 4, tokens)
		if r := third.Results()[0]; third.Allowed || r.RetryAfter != time.Second || r.ResetAfter != time.Second || third.Slot != "" {
			t.Fatalf("a third request of cost 4 with 8 held: got %+v, id %q; want denied, retry and reset in a second (the holds lapse in 30s), no id", third.Results(), third.Slot)
		}
		remaining(t, "the third request", third, 2)
		if p := peek(t, s, key, 2, tokens); !p.Allowed {
			t.Fatalf("Peek(2) with 8 held: denied, want allowed; %+v", p.Results())
		}
		e := end(t, s, key, 1, first, tokens)
		remaining(t, "End(1) of the first: its 4 back, 1 taken, 4 still held", e, 5)
		e = end(t, s, key, 1, first, tokens)
		remaining(t, "End(1) of the first again: nothing more", e, 5)
		third = allow(t, s, key, 4, tokens)
		if !third.Allowed {
			t.Fatalf("a third request after End: denied, want allowed; %+v", third.Results())
		}
		remaining(t, "the third request after End", third, 1)
		e = end(t, s, key, 5, second, tokens)
		remaining(t, "End(5) of the second", e, 0)
		if r := e.Results()[0]; r.Allowed {
			t.Fatalf("End(5) of the second with 6 taken and 4 held: a request of 1 allowed, want denied; %+v", e.Results())
		}
		e = end(t, s, key, 0, third, tokens)
		remaining(t, "End(0) of the third", e, 4)
	})

	t.Run("one id", func(t *testing.T) {
		t.Parallel()
		s, _ := h.one(t)
		key := uniqueKey(t, "k")
		limits := []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 1, Name: "in-flight"}, tokens}
		d := allow(t, s, key, 4, limits...)
		if rs := d.Results(); !d.Allowed || d.Slot == "" || rs[0].Remaining != 0 || rs[1].Remaining != 6 {
			t.Fatalf("a request of cost 4: got %+v, id %q; want allowed with its slot taken, 4 held and an id", rs, d.Slot)
		}
		if again := allow(t, s, key, 1, limits...); again.Allowed || again.Results()[1].Remaining != 6 {
			t.Fatalf("a second request with the slot taken: got %+v; want denied, the 4 still held", again.Results())
		}
		e := end(t, s, key, 2, d, limits...)
		if rs := e.Results(); rs[0].Remaining != 1 || rs[1].Remaining != 8 {
			t.Fatalf("End(2): got %+v; want the slot back and 2 taken in place of the 4 held", rs)
		}
		if !allow(t, s, key, 1, limits...).Allowed {
			t.Fatalf("after End: denied, want allowed")
		}
	})

	t.Run("override and reset", func(t *testing.T) {
		t.Parallel()
		s, _ := h.one(t)
		key := uniqueKey(t, "k")
		d := allow(t, s, key, 4, tokens)
		raised := tokens
		raised.Quota = 20
		if p := peek(t, s, key, 1, raised); p.Results()[0].Remaining != 16 {
			t.Fatalf("Peek under a quota raised to 20: got %+v, want 16 left: the 4 held stay held", p.Results())
		}
		if err := s.Reset(context.Background(), key, limitsOf(t, tokens)); err != nil {
			t.Fatal(err)
		}
		if p := peek(t, s, key, 1, tokens); p.Results()[0].Remaining != 10 {
			t.Fatalf("after Reset: got %+v, want all 10 left: the hold is forgotten", p.Results())
		}
		e := end(t, s, key, 3, d, tokens)
		remaining(t, "End(3) of a request whose hold Reset forgot: charged", e, 7)
	})

	t.Run("lapse", func(t *testing.T) {
		t.Parallel()
		s, c := h.one(t)
		if !c.Pinned() {
			t.Skip("needs a pinned clock: on a real one the store renews its holds, which the test cannot stop")
		}
		key := uniqueKey(t, "k")
		d := allow(t, s, key, 4, tokens)
		c.Advance(holdLifeTime - time.Microsecond)
		remaining(t, "1µs before the hold lapses", peek(t, s, key, 1, tokens), 6)
		denied := allow(t, s, key, 7, tokens)
		if r := denied.Results()[0]; denied.Allowed || r.RetryAfter != time.Microsecond {
			t.Fatalf("a request of 7 1µs before the hold of 4 lapses: got %+v; want denied, retry in 1µs", denied.Results())
		}
		c.Advance(time.Microsecond)
		remaining(t, "when the hold lapses", peek(t, s, key, 1, tokens), 10)
		if a := allow(t, s, key, 7, tokens); !a.Allowed {
			t.Fatalf("a request of 7 when the hold of 4 lapsed: denied, want allowed; %+v", a.Results())
		}
		e := end(t, s, key, 2, d, tokens)
		remaining(t, "End(2) of the request whose hold lapsed: charged, 7 held", e, 1)
		e = end(t, s, key, 2, d, tokens)
		remaining(t, "End(2) of it again", e, 1)
	})

	t.Run("renewal", func(t *testing.T) {
		t.Parallel()
		s, c := h.one(t)
		if !c.Pinned() {
			t.Skip("needs a pinned clock: on a real one the store renews its holds when it will")
		}
		r, ok := s.(renewer)
		if !ok {
			t.Skip("the store cannot be told to renew its holds (it has no RenewSlots)")
		}
		key := uniqueKey(t, "k")
		d := allow(t, s, key, 4, tokens)
		c.Advance(20 * time.Second)
		r.RenewSlots()
		c.Advance(holdLifeTime - time.Microsecond)
		remaining(t, "1µs before a hold renewed lapses", peek(t, s, key, 1, tokens), 6)
		c.Advance(time.Microsecond)
		remaining(t, "when the renewed hold lapses", peek(t, s, key, 1, tokens), 10)
		r.RenewSlots()
		remaining(t, "a lapsed hold renewed", peek(t, s, key, 1, tokens), 10)
		e := end(t, s, key, 3, d, tokens)
		remaining(t, "End(3) of the request whose hold lapsed", e, 7)
	})
}

// testReservePeekAgreesWithAllow is testPeekAgreesWithAllow with holds
// out: under random limits, some charged from usage and others of a
// fixed cost, admitted requests stay in flight, their cost held, until a random
// later step ends them, and some never end (their holds lapse). Each
// request is peeked at and then sent at the same instant: the Peek
// foretells the decision, its RetryAfter, and each limit's answer, its
// Remaining what it takes more when allowed, and when denied the same,
// with the same ResetAfter.
func testReservePeekAgreesWithAllow(t *testing.T, h Harness) {
	s, c := h.one(t)
	if !c.Pinned() {
		t.Skip("needs a pinned clock: the Peek and the Allow must see the same instant")
	}
	rng := newRand(t)
	windows := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second}
	for round := range traffic(30) {
		limits := withFixedCosts(rng, randomLimits(rng, windows))
		for i := range limits {
			if limits[i].Algorithm != ratelimit.SlidingLog && limits[i].Cost == 0 && rng.IntN(3) > 0 {
				limits[i].Usage = true
			}
		}
		key := uniqueKey(t, fmt.Sprintf("%d", round))
		var flight []ratelimit.Decision
		for step := range 100 {
			c.Advance(randomAdvance(rng, limits) / 4)
			if len(flight) > 0 && rng.IntN(4) == 0 {
				i := rng.IntN(len(flight))
				end(t, s, key, rng.IntN(capacity(limits[0])+1), flight[i], limits...)
				flight = append(flight[:i], flight[i+1:]...)
			}
			cost := randomCost(rng, limits)
			p := peek(t, s, key, cost, limits...)
			a := allow(t, s, key, cost, limits...)
			if p.Allowed != a.Allowed || p.RetryAfter != a.RetryAfter {
				t.Fatalf("round %d step %d: %v cost %d, %d in flight: Peek said allowed %v retry after %v, Allow then %v %v:\npeek  %+v\nallow %+v",
					round, step, limits, cost, len(flight), p.Allowed, p.RetryAfter, a.Allowed, a.RetryAfter, p, a)
			}
			for i, pr := range p.Results() {
				ar := a.Results()[i]
				remaining := ar.Remaining
				if a.Allowed {
					remaining += costOf(limits[i], cost)
				}
				if pr.Allowed != ar.Allowed || pr.RetryAfter != ar.RetryAfter || pr.Remaining != remaining || !a.Allowed && pr.ResetAfter != ar.ResetAfter {
					t.Fatalf("round %d step %d: %v cost %d, %d in flight: Results[%d]:\npeek  %+v\nallow %+v", round, step, limits, cost, len(flight), i, pr, ar)
				}
			}
			if a.Allowed {
				flight = append(flight, a)
			}
		}
	}
}
