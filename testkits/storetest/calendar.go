package storetest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// calendarCase is a boundary between two calendar periods, written out by
// hand: end is when a period ends and next when the one after it ends,
// both in UTC, so that the suite checks the stores, and the Model, against
// the calendar itself.
type calendarCase struct {
	name      string
	limit     ratelimit.Limit
	end, next time.Time
}

func utc(y int, m time.Month, d, h, min int) time.Time {
	return time.Date(y, m, d, h, min, 0, 0, time.UTC)
}

// calendarCases are month ends of 31, 30, 28 and 29 days, a leap day,
// both clock changes of a European and an American zone, a zone 5h45m
// ahead of UTC, and the end of a year.
func calendarCases() []calendarCase {
	monthly := func(zone string) ratelimit.Limit {
		return ratelimit.Limit{Algorithm: ratelimit.Monthly, Quota: 3, Zone: zone}
	}
	daily := func(zone string) ratelimit.Limit {
		return ratelimit.Limit{Algorithm: ratelimit.Daily, Quota: 3, Zone: zone}
	}
	return []calendarCase{
		{"January into a February of 28 days", monthly(""), utc(2031, 2, 1, 0, 0), utc(2031, 3, 1, 0, 0)},
		{"April into May", monthly("UTC"), utc(2031, 5, 1, 0, 0), utc(2031, 6, 1, 0, 0)},
		{"January into a February of 29 days", monthly("UTC"), utc(2032, 2, 1, 0, 0), utc(2032, 3, 1, 0, 0)},
		{"leap day", daily("UTC"), utc(2032, 2, 29, 0, 0), utc(2032, 3, 1, 0, 0)},
		{"February into a March 1h short, Paris", monthly("Europe/Paris"), utc(2031, 2, 28, 23, 0), utc(2031, 3, 31, 22, 0)},
		{"a day of 23 hours, Paris", daily("Europe/Paris"), utc(2031, 3, 29, 23, 0), utc(2031, 3, 30, 22, 0)},
		{"a day of 25 hours, Paris", daily("Europe/Paris"), utc(2031, 10, 25, 22, 0), utc(2031, 10, 26, 23, 0)},
		{"a week of 167 hours from Monday, New York", ratelimit.Limit{Algorithm: ratelimit.Weekly, Quota: 3, Zone: "America/New_York", Weekday: time.Monday},
			utc(2031, 3, 3, 5, 0), utc(2031, 3, 10, 4, 0)},
		{"a week of 169 hours from Sunday, New York", ratelimit.Limit{Algorithm: ratelimit.Weekly, Quota: 3, Zone: "America/New_York"},
			utc(2031, 11, 2, 4, 0), utc(2031, 11, 9, 5, 0)},
		{"the year's end, Kathmandu", monthly("Asia/Kathmandu"), utc(2031, 12, 31, 18, 15), utc(2032, 1, 31, 18, 15)},
	}
}

// testCalendarBoundaries crosses each case's boundary on a pinned clock:
// the quota spent before it is denied to the last microsecond, with
// RetryAfter, ResetAfter and Window the exact time left; at the boundary
// the count starts afresh, and the next period's times are its true
// length. Every answer also matches the Model's. A real clock checks that
// the times a store gives are those of the calendar.
func testCalendarBoundaries(t *testing.T, h Harness) {
	for _, tc := range calendarCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, c := h.one(t)
			key := uniqueKey(t, "k")
			if !c.Pinned() {
				d := allow(t, s, key, 1, tc.limit)
				now := c.Now()
				_, end := calendarPeriod(tc.limit, now)
				if r := d.Results()[0]; !d.Allowed || !near(r.ResetAfter, end.Sub(now), time.Second) || !near(r.Window, end.Sub(now), time.Second) {
					t.Fatalf("got %+v, want allowed with ResetAfter and Window about %v (the period ends %v)", r, end.Sub(now), end)
				}
				return
			}
			var m Model
			step := func(where string, cost int, allowed bool, retry, reset time.Duration) {
				t.Helper()
				now := c.Now().UnixMicro()
				d := allow(t, s, key, cost, tc.limit)
				want := m.Allow(now, key, cost, tc.limit)
				r := d.Results()[0]
				if d.Allowed != allowed || r.RetryAfter != retry || r.ResetAfter != reset || r.Window != reset {
					t.Fatalf("%s (%v): got allowed %v, RetryAfter %v, ResetAfter %v, Window %v; want %v, %v, %v",
						where, c.Now().UTC(), d.Allowed, r.RetryAfter, r.ResetAfter, r.Window, allowed, retry, reset)
				}
				if !sameDecision(d, want, 0) {
					t.Fatalf("%s: store says %+v, the Model %+v", where, d.Results(), want.Results())
				}
			}
			c.Advance(tc.end.Add(-90 * time.Minute).Sub(c.Now()))
			step("90m before the end, the whole quota", 3, true, 0, 90*time.Minute)
			step("then one more", 1, false, 90*time.Minute, 90*time.Minute)
			p := peek(t, s, key, 1, tc.limit)
			if r := p.Results()[0]; p.Allowed || r.Remaining != 0 || r.RetryAfter != 90*time.Minute {
				t.Fatalf("Peek: got %+v, want a denial with nothing left for 90m", r)
			}
			c.Advance(90*time.Minute - time.Microsecond)
			step("1µs before the end", 1, false, time.Microsecond, time.Microsecond)
			c.Advance(time.Microsecond)
			length := tc.next.Sub(tc.end)
			step("at the end", 1, true, 0, length)
			c.Advance(length - time.Microsecond)
			step("1µs before the next end", 3, false, time.Microsecond, time.Microsecond)
			c.Advance(time.Microsecond)
			step("at the next end", 3, true, 0, calendarLength(tc.limit, tc.next))
		})
	}
}

// calendarPeriod is the Model's period of l that holds t.
func calendarPeriod(l ratelimit.Limit, t time.Time) (start, end time.Time) {
	s, e := newCalendar(l).period(t.UnixMicro())
	return time.UnixMicro(s), time.UnixMicro(e)
}

// calendarLength is the length of l's period that starts at t.
func calendarLength(l ratelimit.Limit, t time.Time) time.Duration {
	s, e := calendarPeriod(l, t)
	return e.Sub(s)
}

func near(a, b, tolerance time.Duration) bool { return a-b <= tolerance && b-a <= tolerance }

// testCalendarMatchesModel replays random traffic across each case's
// boundary, by several keys, under the calendar limit alone and beside
// random limits of the other algorithms, and wants the Model's decisions
// exactly. It needs a pinned clock.
func testCalendarMatchesModel(t *testing.T, h Harness) {
	for _, tc := range calendarCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, c := h.one(t)
			if !c.Pinned() {
				t.Skip("needs a pinned clock: the periods are days long")
			}
			rng := newRand(t)
			c.Advance(tc.end.Add(-500*time.Millisecond - time.Duration(rng.IntN(1000))*time.Millisecond).Sub(c.Now()))
			var m Model
			// A key per set: stores share the state of limits of one
			// algorithm and window whatever their quotas, the Model not.
			keys := []string{uniqueKey(t, "a"), uniqueKey(t, "b"), uniqueKey(t, "c"), uniqueKey(t, "d")}
			sets := [][]ratelimit.Limit{{tc.limit}}
			for range 3 {
				sets = append(sets, append([]ratelimit.Limit{tc.limit}, otherLimits(rng)...))
			}
			// Past the boundary at least, however little traffic the run has.
			for i := 0; i < traffic(300) || !c.Now().After(tc.end.Add(time.Second)); i++ {
				j := rng.IntN(len(keys))
				key, limits := keys[j], sets[j]
				cost := randomCost(rng, limits)
				now := c.Now().UnixMicro()
				got, err := s.Allow(context.Background(), key, cost, limitsOf(t, limits...))
				if err != nil {
					t.Fatal(err)
				}
				want := m.Allow(now, key, cost, limits...)
				if !sameDecision(got, want, 0) {
					t.Fatalf("request %d at %v, cost %d, limits %v: store %+v, Model %+v", i, c.Now().UTC(), cost, limits, got.Results(), want.Results())
				}
				if msg := brokenInvariant(got, cost, limits); msg != "" {
					t.Fatalf("request %d: %s", i, msg)
				}
				c.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
			}
		})
	}
}

// otherLimits returns random limits of the four other algorithms that
// count with any calendar limit.
func otherLimits(rng *rand.Rand) []ratelimit.Limit {
	var ls []ratelimit.Limit
	for _, l := range randomLimits(rng, []time.Duration{time.Second, 3 * time.Second}) {
		if !isCalendar(l) {
			ls = append(ls, l)
		}
	}
	return ls
}

// testCalendarPeekReset spends a calendar quota beside a sliding window,
// checks that Peek sees it spent, taking nothing, and that Reset gives
// the whole quota back.
func testCalendarPeekReset(t *testing.T, h Harness) {
	s, _ := h.one(t)
	key := uniqueKey(t, "k")
	limits := []ratelimit.Limit{
		{Algorithm: ratelimit.Weekly, Quota: 2, Zone: "Asia/Tokyo", Weekday: time.Wednesday},
		ratelimit.PerMinute(100),
	}
	for i := range 2 {
		if d := allow(t, s, key, 1, limits...); !d.Allowed {
			t.Fatalf("request %d: denied, want allowed; %+v", i, d.Results())
		}
	}
	for range 2 {
		p := peek(t, s, key, 1, limits...)
		if r := p.Results()[0]; p.Allowed || r.Remaining != 0 || p.Results()[1].Remaining != 98 {
			t.Fatalf("Peek: got %+v, want the week spent and 98 left a minute", p.Results())
		}
	}
	if err := s.Reset(context.Background(), key, limitsOf(t, limits...)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if d := allow(t, s, key, 2, limits...); !d.Allowed || d.Results()[0].Remaining != 0 {
		t.Fatalf("after Reset: got %+v, want the whole week's quota back", d.Results())
	}
}
