package storetest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// testConcurrentSlots takes the two slots of a Concurrent limit, one by a
// request of cost 5 (a slot is one whatever the cost); the third request
// is denied, with a RetryAfter of at most a second, and Peek agrees; End
// gives a slot back, which the next request takes; Reset frees them all.
// On a pinned clock, slots whose slots were not renewed come back when
// the slots end.
func testConcurrentSlots(t *testing.T, h Harness) {
	s, c := h.one(t)
	key := uniqueKey(t, "k")
	limits := []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 2, Name: "in-flight"}, ratelimit.PerMinute(100)}
	first := allow(t, s, key, 5, limits...)
	second := allow(t, s, key, 1, limits...)
	for i, d := range []ratelimit.Decision{first, second} {
		if r := d.Results()[0]; !d.Allowed || r.Remaining != 1-i || d.Slot == "" {
			t.Fatalf("request %d: got %+v, slot %q; want allowed with %d slots left and a slot", i, d.Results(), d.Slot, 1-i)
		}
	}
	if first.Slot == second.Slot {
		t.Fatalf("two requests got the same slot %q", first.Slot)
	}
	if got := first.Results()[1].Remaining; got != 95 {
		t.Fatalf("the other limit: got %d left, want 95: the cost is taken there", got)
	}
	d := allow(t, s, key, 1, limits...)
	if r := d.Results()[0]; d.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.RetryAfter > time.Second || d.Slot != "" {
		t.Fatalf("a third request: got %+v, slot %q; want denied with 0 left, retry within a second, no slot", d.Results(), d.Slot)
	}
	if p := peek(t, s, key, 1, limits...); p.Allowed || p.Results()[0].Remaining != 0 {
		t.Fatalf("Peek with every slot taken: got %+v, want a denial", p.Results())
	}
	e := end(t, s, key, 0, first, limits...)
	if r := e.Results()[0]; !r.Allowed || r.Remaining != 1 {
		t.Fatalf("End: got %+v, want a slot back", e.Results())
	}
	third := allow(t, s, key, 1, limits...)
	if !third.Allowed {
		t.Fatalf("after End: denied, want the slot given back; %+v", third.Results())
	}
	if err := s.Reset(context.Background(), key, limitsOf(t, limits...)); err != nil {
		t.Fatal(err)
	}
	if p := peek(t, s, key, 1, limits...); p.Results()[0].Remaining != 2 {
		t.Fatalf("after Reset: %d slots left, want 2", p.Results()[0].Remaining)
	}
	if !c.Pinned() {
		return
	}
	a, b := allow(t, s, key, 1, limits...), allow(t, s, key, 1, limits...)
	if !a.Allowed || !b.Allowed || allow(t, s, key, 1, limits...).Allowed {
		t.Fatalf("taking both slots again failed")
	}
	c.Advance(30*time.Second - time.Microsecond)
	if allow(t, s, key, 1, limits...).Allowed {
		t.Fatalf("1µs before the slots end: allowed, want denied")
	}
	c.Advance(time.Microsecond)
	if d := allow(t, s, key, 1, limits...); !d.Allowed || d.Results()[0].Remaining != 1 {
		t.Fatalf("when the slots end: got %+v, want their slots back", d.Results())
	}
}

// testConcurrentMatchesModel replays random requests that take slots of
// a Concurrent limit, beside another limit, and end in a random order,
// some never (their slots run out), and wants the Model's answers to
// Allow and End: exactly on a pinned clock, whose steps reach past a
// slot now and then, and within a second on a real one.
func testConcurrentMatchesModel(t *testing.T, h Harness) {
	s, c := h.one(t)
	rng := newRand(t)
	_, rounds, steps, tolerance := modelTraffic(c)
	// Slots of 30s: a store renews its slots every third of one, in
	// real time, which the Model does not; on a pinned clock no renewal
	// comes while the test runs.
	const slot = 30 * time.Second
	r := &replay{t: t, c: c, m: new(Model), tolerance: tolerance}
	for round := range rounds {
		limits := []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 1 + rng.IntN(4), Window: slot}}
		if rng.IntN(2) == 0 {
			limits = append(limits, ratelimit.Limit{Quota: 5 + rng.IntN(10), Window: time.Hour, Usage: rng.IntN(2) == 0})
		}
		key := uniqueKey(t, strconv.Itoa(round)+"c")
		type open struct{ got, want ratelimit.Decision }
		var flight []open
		for step := range steps {
			if c.Pinned() && rng.IntN(4) == 0 {
				c.Advance(time.Duration(rng.Int64N(int64(slot * 3 / 2))).Truncate(time.Microsecond))
			}
			if len(flight) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(flight))
				o := flight[i]
				flight = append(flight[:i], flight[i+1:]...)
				usage := rng.IntN(3)
				r.step(fmt.Sprintf("round %d step %d: %v End(%d)", round, step, limits, usage),
					func() ratelimit.Decision { return end(t, s, key, usage, o.got, limits...) },
					func(m *Model, now int64) ratelimit.Decision { return m.End(now, key, usage, o.want, limits...) })
				continue
			}
			got, want, _ := r.allow(fmt.Sprintf("round %d step %d", round, step), s, key, 1+rng.IntN(3), limits)
			if got.Allowed {
				flight = append(flight, open{got, want})
			}
		}
		for _, o := range flight {
			end(t, s, key, 0, o.got, limits...)
		}
	}
}
