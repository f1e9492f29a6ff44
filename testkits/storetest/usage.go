package storetest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// usageLimits are a limit of 5 per 2s charged from usage for each
// algorithm that can carry a debt, with a calendar day in Paris last.
func usageLimits() []ratelimit.Limit {
	return []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Quota: 5, Window: 2 * time.Second, Usage: true},
		{Quota: 5, Window: 2 * time.Second, Precision: 200 * time.Millisecond, Usage: true},
		{Algorithm: ratelimit.TokenBucket, Quota: 5, Window: 2 * time.Second, Usage: true},
		{Algorithm: ratelimit.Daily, Quota: 5, Zone: "Europe/Paris", Usage: true},
	}
}

// end ends a request and fails t on an error or a broken invariant.
func end(t *testing.T, s ratelimit.Store, key string, usage int, admitted ratelimit.Decision, limits ...ratelimit.Limit) ratelimit.Decision {
	t.Helper()
	d, err := s.End(context.Background(), key, usage, limitsOf(t, limits...), admitted)
	if err != nil {
		t.Fatalf("End(%q, %d): %v", key, usage, err)
	}
	if msg := brokenAnswer(d, 1, limits, true); msg != "" {
		t.Fatalf("End(%q, %d): %s: %+v", key, usage, msg, d.Results())
	}
	return d
}

// testUsageDebt checks each algorithm charged from usage, beside a limit
// that is not: a request of cost 3 takes 3 from the other limit and holds
// 3 of it, leaving 2; End with a usage of 8, past its quota of 5, gives
// the hold back and leaves it in debt, denying even a request of 1; a
// second End of the request charges nothing more; it admits again when
// the debt is paid back, exactly when its RetryAfter says on a pinned
// clock. Every answer matches the Model's there.
func testUsageDebt(t *testing.T, h Harness) {
	for _, l := range usageLimits() {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			t.Parallel()
			s, c := h.one(t)
			if !c.Pinned() && l.Algorithm == ratelimit.Daily {
				t.Skip("a day's debt is paid at midnight: it needs a pinned clock")
			}
			limits := []ratelimit.Limit{l, ratelimit.PerMinute(100).Named("requests")}
			key := uniqueKey(t, "k")
			var m Model
			same := func(where string, got, want ratelimit.Decision) {
				t.Helper()
				if c.Pinned() && !sameDecision(got, want, 0) {
					t.Fatalf("%s: store %+v, Model %+v", where, got.Results(), want.Results())
				}
			}
			d := allow(t, s, key, 3, limits...)
			want := m.Allow(c.Now().UnixMicro(), key, 3, limits...)
			same("Allow(3)", d, want)
			if got := d.Results(); !d.Allowed || got[0].Remaining != 2 || got[1].Remaining != 97 || d.Slot == "" {
				t.Fatalf("Allow(3): got %+v, slot %q; want allowed, 2 left of the usage limit (3 held), 97 of the other, and an id for the hold", got, d.Slot)
			}
			if p := peek(t, s, key, 1, limits...); p.Results()[0].Remaining != 2 {
				t.Fatalf("Peek(1) with 3 held: got %+v, want 2 left of the usage limit", p.Results())
			}
			e := end(t, s, key, 8, d, limits...)
			same("End(8)", e, m.End(c.Now().UnixMicro(), key, 8, want, limits...))
			if got := e.Results(); got[0].Allowed || got[0].Remaining != 0 || got[1].Remaining != 97 {
				t.Fatalf("End(8): got %+v; want the usage limit in debt, nothing left, and the other untouched", got)
			}
			again := end(t, s, key, 8, d, limits...)
			same("End(8) again", again, m.End(c.Now().UnixMicro(), key, 8, want, limits...))
			if c.Pinned() && !sameDecision(again, e, 0) {
				t.Fatalf("End(8) again, at the same instant: got %+v, want %+v: a second settle counts nothing", again.Results(), e.Results())
			}
			d = allow(t, s, key, 1, limits...)
			same("Allow(1) in debt", d, m.Allow(c.Now().UnixMicro(), key, 1, limits...))
			if d.Allowed {
				t.Fatalf("Allow(1) in debt: allowed, want denied; %+v", d.Results())
			}
			retry := d.RetryAfter
			if c.Pinned() {
				c.Advance(retry - time.Microsecond)
				d = allow(t, s, key, 1, limits...)
				same("1µs before RetryAfter", d, m.Allow(c.Now().UnixMicro(), key, 1, limits...))
				if d.Allowed {
					t.Fatalf("1µs before RetryAfter %v: allowed, want denied", retry)
				}
				c.Advance(time.Microsecond)
			} else {
				c.Advance(retry + realMargin)
			}
			d = allow(t, s, key, 1, limits...)
			same("at RetryAfter", d, m.Allow(c.Now().UnixMicro(), key, 1, limits...))
			if !d.Allowed {
				t.Fatalf("after RetryAfter %v: denied, want allowed; %+v", retry, d.Results())
			}
		})
	}
}

// testUsageMatchesModel replays random traffic under random limits of
// which some are charged from usage, and wants the Model's answers to
// every call: exactly on a pinned clock, within a second on a real one
// (whose windows are days long). An admitted request is ended at once,
// with a random usage from nothing to twice the quota, or left in flight,
// its cost held, until a later step ends it; now and then a request is
// ended a second time, which counts nothing while its settle's mark
// lasts. On a pinned clock, which now and then moves on by up to 45s, the
// holds of requests in flight lapse 30s after they were made, as the
// Model's do, but for renewals of both now and then when the store takes
// them (see renewer); on a real one the store renews them itself, and the
// Model is renewed before each step.
func testUsageMatchesModel(t *testing.T, h Harness) {
	s, r := newReplay(t, h)
	rng := r.rng
	renew, _ := s.(renewer)
	type request struct{ got, want ratelimit.Decision }
	for round := range r.rounds {
		limits := withFixedCosts(rng, randomLimits(rng, r.windows))
		for i := range limits {
			if limits[i].Algorithm != ratelimit.SlidingLog && limits[i].Cost == 0 && rng.IntN(2) == 0 {
				limits[i].Usage = true
			}
		}
		key := uniqueKey(t, strconv.Itoa(round)+"u")
		var flight, ended []request
		settle := func(what string, q request) {
			usage := rng.IntN(2*capacity(limits[0]) + 1)
			r.step(fmt.Sprintf("%s: %v End(%d)", what, limits, usage),
				func() ratelimit.Decision { return end(t, s, key, usage, q.got, limits...) },
				func(m *Model, now int64) ratelimit.Decision { return m.End(now, key, usage, q.want, limits...) })
			if ended = append(ended, q); len(ended) > 8 {
				ended = ended[1:]
			}
		}
		for step := range r.steps {
			r.advance(limits)
			if r.c.Pinned() && rng.IntN(8) == 0 { // to a hold's end, or past it, now and then
				r.c.Advance(time.Duration(rng.Int64N(int64(3 * holdLifeTime / 2))).Truncate(time.Microsecond))
			}
			if !r.c.Pinned() {
				r.m.Renew(r.c.Now().UnixMicro())
			} else if renew != nil && rng.IntN(4) == 0 {
				renew.RenewSlots()
				r.m.Renew(r.c.Now().UnixMicro())
			}
			what := fmt.Sprintf("round %d step %d", round, step)
			switch n := rng.IntN(10); {
			case n < 2 && len(flight) > 0:
				i := rng.IntN(len(flight))
				q := flight[i]
				flight = slices.Delete(flight, i, i+1)
				settle(what, q)
			case n == 3 && len(ended) > 0:
				settle(what+", a second time", ended[rng.IntN(len(ended))])
			default:
				got, want, _ := r.allow(what, s, key, randomCost(rng, limits), limits)
				switch {
				case !got.Allowed:
				case rng.IntN(2) == 0:
					settle(what, request{got, want})
				default:
					flight = append(flight, request{got, want})
				}
			}
		}
		for _, q := range flight {
			end(t, s, key, 0, q.got, limits...)
		}
	}
}

// testUsageInvalid checks that End refuses a negative usage, and what
// Reset refuses, before the store is contacted.
func testUsageInvalid(t *testing.T, h Harness) {
	s, _ := h.one(t)
	limits := limitsOf(t, usageLimits()[0])
	for _, tt := range []struct {
		key   string
		usage int
	}{{"k", -1}, {"", 1}} {
		if _, err := s.End(context.Background(), tt.key, tt.usage, limits, ratelimit.Decision{}); !isInvalid(err) {
			t.Errorf("End(%q, %d): got %v, want ErrInvalid", tt.key, tt.usage, err)
		}
	}
	if _, err := s.End(context.Background(), "k", 1, nil, ratelimit.Decision{}); !isInvalid(err) {
		t.Errorf("End with nil limits: got %v, want ErrInvalid", err)
	}
}
