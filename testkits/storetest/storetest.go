// Package storetest is the conformance suite that every
// [ratelimit.Store] must pass.
//
// A store's tests call [Run] with a [Harness] that makes fresh stores. The
// suite checks each algorithm against its definition: the worked examples
// of the designs the algorithms come from, a differential test against
// [Model] over randomized traffic, invariants that hold for every
// decision, the promise of every answer's effective window (the
// RateLimit header's t), all-or-nothing multi-limit requests, exact counts under
// concurrency, that Peek answers as Allow would while changing nothing,
// and bans (see ratelimit.Ban): a worked example, each algorithm, Peek,
// Reset, and random traffic against the Model; calendar quotas across
// month ends, a leap day and clock changes; and limits charged from usage,
// whose admitted requests hold their cost until End settles it. Tests that need exact
// timing run only when the harness pins the clock; with a real clock they
// sleep, with margins. The random traffic runs at full size with
// RATELIMIT_FAULTS=1, as CI runs it, and a sixth of it otherwise.
package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// Clock is the time a store sees.
type Clock interface {
	// Now returns the store's current time; exact when Pinned.
	Now() time.Time
	// Advance moves the store's time forward by d. A real clock sleeps.
	Advance(d time.Duration)
	// Pinned reports whether time stands still between calls to Advance.
	Pinned() bool
}

// Harness tells the suite how to make stores.
type Harness struct {
	// New returns n stores (n >= 1) that share one fresh, empty state, for
	// example n clients of one Redis server with a key prefix of their
	// own, and the clock they see. The suite calls it once per subtest,
	// from parallel subtests.
	New func(t *testing.T, n int) ([]ratelimit.Store, Clock)
}

func (h Harness) one(t *testing.T) (ratelimit.Store, Clock) {
	t.Helper()
	stores, clock := h.New(t, 1)
	return stores[0], clock
}

// Run runs the conformance suite against the stores h makes.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"FixedWindowExample", testFixedWindowExample},
		{"SlidingLogExample", testSlidingLogExample},
		{"BoundaryBurst", testBoundaryBurst},
		{"EachAlgorithm", testEachAlgorithm},
		{"Edges", testEdges},
		{"Cost", testCost},
		{"MultiLimitAllOrNothing", testMultiLimitAllOrNothing},
		{"KeysAreIndependent", testKeysAreIndependent},
		{"NameIsNotState", testNameIsNotState},
		{"Reset", testReset},
		{"InvalidInput", testInvalidInput},
		{"Invariants", testInvariants},
		{"MatchesModel", testMatchesModel},
		{"OverridesMatchModel", testOverridesMatchModel},
		{"PeekChangesNothing", testPeekChangesNothing},
		{"PeekMatchesModel", testPeekMatchesModel},
		{"PeekAgreesWithAllow", testPeekAgreesWithAllow},
		{"PeekInvalidInput", testPeekInvalidInput},
		{"SlidingWindowBound", testSlidingWindowBound},
		{"EffectiveWindow", testEffectiveWindow},
		{"Concurrency", testConcurrency},
		{"BanExample", testBanExample},
		{"BanEachAlgorithm", testBanEachAlgorithm},
		{"BanMultiLimit", testBanMultiLimit},
		{"BanPeek", testBanPeek},
		{"BanReset", testBanReset},
		{"BanMatchesModel", testBanMatchesModel},
		{"CalendarBoundaries", testCalendarBoundaries},
		{"CalendarMatchesModel", testCalendarMatchesModel},
		{"CalendarPeekReset", testCalendarPeekReset},
		{"UsageDebt", testUsageDebt},
		{"UsageMatchesModel", testUsageMatchesModel},
		{"UsageInvalid", testUsageInvalid},
		{"ReserveExample", testReserveExample},
		{"ReservePeekAgreesWithAllow", testReservePeekAgreesWithAllow},
		{"ConcurrentSlots", testConcurrentSlots},
		{"ConcurrentMatchesModel", testConcurrentMatchesModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

// allow decides one request and fails t on an error or a broken invariant.
func allow(t *testing.T, s ratelimit.Store, key string, cost int, limits ...ratelimit.Limit) ratelimit.Decision {
	t.Helper()
	d, err := s.Allow(context.Background(), key, cost, limitsOf(t, limits...))
	if err != nil {
		t.Fatalf("Allow(%q, %d, %v): %v", key, cost, limits, err)
	}
	if msg := brokenInvariant(d, cost, limits); msg != "" {
		t.Fatalf("Allow(%q, %d, %v) = %+v: %s", key, cost, limits, d, msg)
	}
	return d
}

// limitsOf returns limits as a set, failing t if they are invalid.
var limitsOf = testkit.LimitsOf

// capacity is the most units l holds: a token bucket's burst, else its
// quota.
func capacity(l ratelimit.Limit) int {
	if l.Algorithm == ratelimit.TokenBucket && l.Burst != 0 {
		return l.Burst
	}
	return l.Quota
}

// withDefaults fills in l's defaulted zero fields: a token bucket's Burst,
// a sliding window's Precision.
func withDefaults(l ratelimit.Limit) ratelimit.Limit {
	switch l.Algorithm {
	case ratelimit.TokenBucket:
		if l.Burst == 0 {
			l.Burst = l.Quota
		}
	case ratelimit.SlidingWindow:
		if l.Precision == 0 {
			l.Precision = l.Window / 10
		}
	}
	return l
}

// CheckDecision reports what is wrong with a store's answer to a request
// of cost against limits, whatever the traffic: the results match the
// limits, Remaining lies within 0 and the capacity, RetryAfter is positive
// exactly for the limits that denied, durations are within bounds, and
// Allowed agrees with the results; for a banned key (Banned above zero),
// every limit denies with nothing remaining and times at least the ban's.
// It returns nil when nothing is.
func CheckDecision(d ratelimit.Decision, cost int, limits []ratelimit.Limit) error {
	if msg := brokenInvariant(d, cost, limits); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// brokenInvariant returns what is wrong with a decision that every store
// must get right whatever the traffic, or "".
func brokenInvariant(d ratelimit.Decision, cost int, limits []ratelimit.Limit) string {
	return brokenAnswer(d, cost, limits, false)
}

// brokenAnswer is brokenInvariant for an answer of Allow, or of Peek when
// peeked: then nothing was taken, and a limit allows exactly when cost
// fits in its Remaining.
func brokenAnswer(d ratelimit.Decision, cost int, limits []ratelimit.Limit, peeked bool) string {
	if got, want := len(d.Results()), len(limits); got != want {
		return fmt.Sprintf("got %d results, want %d", got, want)
	}
	if d.Banned != 0 {
		return brokenBan(d, limits)
	}
	all := true
	for i, r := range d.Results() {
		l := limits[i]
		cost := costOf(l, cost)
		if l.Algorithm == ratelimit.Concurrent {
			cost = 1 // a slot, whatever the cost
		}
		switch {
		case r.Limit != l:
			return fmt.Sprintf("Results[%d].Limit = %v, want %v", i, r.Limit, l)
		case r.Remaining < 0:
			return fmt.Sprintf("Results[%d].Remaining = %d, want >= 0", i, r.Remaining)
		case r.Remaining > capacity(l):
			return fmt.Sprintf("Results[%d].Remaining = %d, want <= capacity %d", i, r.Remaining, capacity(l))
		case r.Allowed && r.RetryAfter != 0:
			return fmt.Sprintf("Results[%d] allowed with RetryAfter %v, want 0", i, r.RetryAfter)
		case !r.Allowed && r.RetryAfter <= 0:
			return fmt.Sprintf("Results[%d] denied with RetryAfter %v, want > 0", i, r.RetryAfter)
		case r.ResetAfter < 0 || r.ResetAfter > maxReset(l):
			return fmt.Sprintf("Results[%d].ResetAfter = %v, want within [0, %v]", i, r.ResetAfter, maxReset(l))
		case r.RetryAfter > r.ResetAfter:
			return fmt.Sprintf("Results[%d].RetryAfter %v > ResetAfter %v", i, r.RetryAfter, r.ResetAfter)
		case r.Window < 0 || r.Window > maxWindow(l):
			return fmt.Sprintf("Results[%d].Window = %v, want within [0, %v]", i, r.Window, maxWindow(l))
		case !r.Allowed && r.Window > r.RetryAfter:
			return fmt.Sprintf("Results[%d] denied with Window %v > RetryAfter %v: the promise would outlast the denial", i, r.Window, r.RetryAfter)
		case !peeked && d.Allowed && r.Remaining > capacity(l)-cost: // one charged from usage holds it
			return fmt.Sprintf("Results[%d] took cost %d but Remaining %d > capacity-cost %d", i, cost, r.Remaining, capacity(l)-cost)
		case peeked && r.Allowed != (r.Remaining >= cost):
			return fmt.Sprintf("Results[%d].Allowed = %v with Remaining %d for cost %d, want Allowed exactly when cost fits", i, r.Allowed, r.Remaining, cost)
		}
		all = all && r.Allowed
	}
	if d.Allowed != all {
		return fmt.Sprintf("Allowed = %v, but the results say %v", d.Allowed, all)
	}
	return ""
}

// brokenBan is brokenAnswer for a banned key's answer: denied by every
// limit, nothing remaining, and every time at least the ban's.
func brokenBan(d ratelimit.Decision, limits []ratelimit.Limit) string {
	if d.Banned < 0 || d.Allowed {
		return fmt.Sprintf("Banned = %v with Allowed %v, want Banned > 0 and a denial", d.Banned, d.Allowed)
	}
	for i, r := range d.Results() {
		l := limits[i]
		switch {
		case r.Limit != l:
			return fmt.Sprintf("Results[%d].Limit = %v, want %v", i, r.Limit, l)
		case r.Allowed || r.Remaining != 0:
			return fmt.Sprintf("Results[%d] of a banned key: allowed %v, Remaining %d; want a denial with 0", i, r.Allowed, r.Remaining)
		case r.RetryAfter < d.Banned || r.ResetAfter < d.Banned:
			return fmt.Sprintf("Results[%d] of a key banned for %v: RetryAfter %v, ResetAfter %v; want both at least the ban", i, d.Banned, r.RetryAfter, r.ResetAfter)
		case r.RetryAfter > r.ResetAfter:
			return fmt.Sprintf("Results[%d].RetryAfter %v > ResetAfter %v", i, r.RetryAfter, r.ResetAfter)
		case r.ResetAfter > max(maxReset(l), d.Banned):
			return fmt.Sprintf("Results[%d].ResetAfter = %v, want within the ban %v or [0, %v]", i, r.ResetAfter, d.Banned, maxReset(l))
		case r.Window > d.Banned:
			return fmt.Sprintf("Results[%d].Window = %v of a key banned for %v: it promises nothing passes past the ban's end", i, r.Window, d.Banned)
		}
	}
	return ""
}

// longestPeriod is the longest period of a calendar limit: a month of 31
// days, a week or a day, with an hour gained when clocks go back.
func longestPeriod(a ratelimit.Algorithm) time.Duration {
	switch a {
	case ratelimit.Daily:
		return 25 * time.Hour
	case ratelimit.Weekly:
		return 7*24*time.Hour + time.Hour
	}
	return 31*24*time.Hour + time.Hour
}

// isCalendar reports whether l counts in calendar periods.
func isCalendar(l ratelimit.Limit) bool {
	return l.Algorithm == ratelimit.Daily || l.Algorithm == ratelimit.Weekly || l.Algorithm == ratelimit.Monthly
}

// maxReset is the longest a limit can take to replenish fully, and
// maxWindow its longest effective window (see maxTimes).
func maxReset(l ratelimit.Limit) time.Duration  { reset, _ := maxTimes(l); return reset }
func maxWindow(l ratelimit.Limit) time.Duration { _, window := maxTimes(l); return window }

// maxTimes returns the longest a limit can take to replenish fully, and
// its longest effective window: its window, or a token bucket's time to
// refill one token. A token bucket charged from usage has no bound for
// either: its debt may be any size, and is paid first. A Concurrent limit
// replenishes within a slot and promises nothing for any time. A limit
// charged from usage that denies while holds are out may say to retry in
// up to a second, when the soonest lapses, and to reset no sooner.
func maxTimes(l ratelimit.Limit) (reset, window time.Duration) {
	reset, window = maxTimesUnheld(l)
	if l.Usage {
		reset = max(reset, time.Second)
	}
	return reset, window
}

// maxTimesUnheld is maxTimes but for holds.
func maxTimesUnheld(l ratelimit.Limit) (reset, window time.Duration) {
	switch {
	case l.Algorithm == ratelimit.Concurrent:
		return cmp.Or(l.Window, 30*time.Second), 0
	case l.Usage && l.Algorithm == ratelimit.TokenBucket:
		return time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	case isCalendar(l):
		return longestPeriod(l.Algorithm), longestPeriod(l.Algorithm)
	case l.Algorithm == ratelimit.TokenBucket:
		l = withDefaults(l)
		us, quota := int64(l.Window/time.Microsecond), int64(l.Quota)
		token := time.Duration((us+quota-1)/quota) * time.Microsecond // stores round up to the microsecond
		return time.Duration(int64(l.Window) / quota * int64(l.Burst+1)), token
	}
	return l.Window, l.Window
}

// traffic is n, the full size of some random traffic, with
// RATELIMIT_FAULTS=1 (the long tests, which CI runs), and a sixth of it
// otherwise, so that the default test run stays under a minute.
func traffic(n int) int {
	if os.Getenv(redistest.FaultsEnv) == "1" {
		return n
	}
	return max(1, n/6)
}

// uniqueKey returns a key no other subtest uses.
func uniqueKey(t *testing.T, suffix string) string {
	return t.Name() + "/" + suffix
}

func isInvalid(err error) bool { return errors.Is(err, ratelimit.ErrInvalid) }
