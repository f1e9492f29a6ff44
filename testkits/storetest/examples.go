package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// step is one request of a scripted scenario.
type step struct {
	advance   time.Duration // clock advance before the request
	cost      int           // zero means 1
	allowed   bool
	deniedBy  int           // index of the limit that denies, when !allowed
	remaining []int         // per limit; nil: not checked
	retry     time.Duration // when denied and the clock is pinned; zero: not checked
}

// realMargin is added to a real clock's sleeps that must end past an
// edge. A sleep of exactly the time to the edge can end on it: Redis
// expires a key only once its millisecond clock has passed the expiry, up
// to 1ms after the sleep ends.
const realMargin = 100 * time.Millisecond

// runSteps sends the steps' requests in order and checks each answer. On a
// real clock each advance is realMargin longer, so that a step scripted to
// land on an edge lands past it; the steps that expect an edge not yet
// reached stand most of a second or more before it.
func runSteps(t *testing.T, s ratelimit.Store, c Clock, key string, limits []ratelimit.Limit, steps []step) {
	t.Helper()
	var at time.Duration
	for i, st := range steps {
		if st.advance > 0 {
			if !c.Pinned() {
				st.advance += realMargin
			}
			c.Advance(st.advance)
			at += st.advance
		}
		d := allow(t, s, key, max(st.cost, 1), limits...)
		where := fmt.Sprintf("step %d (t=+%v)", i, at)
		if d.Allowed != st.allowed {
			t.Fatalf("%s: got allowed %v, want %v; %+v", where, d.Allowed, st.allowed, d.Results())
		}
		if !st.allowed {
			r, _ := deniedBy(d)
			if got, want := r.Limit, limits[st.deniedBy]; got != want {
				t.Errorf("%s: denied by %v, want %v", where, got, want)
			}
			if c.Pinned() && st.retry != 0 {
				checkRetry(t, where, r, st.retry)
			}
		}
		for j, want := range st.remaining {
			if got := d.Results()[j].Remaining; got != want {
				t.Errorf("%s: Results[%d].Remaining = %d, want %d", where, j, got, want)
			}
		}
	}
}

// checkRetry compares a RetryAfter with its exact value. A fixed window
// rounds to Redis's millisecond expiry, so it may report up to 1ms more.
func checkRetry(t *testing.T, where string, r ratelimit.Result, want time.Duration) {
	t.Helper()
	slack := time.Duration(0)
	if r.Limit.Algorithm == ratelimit.FixedWindow {
		slack = time.Millisecond
	}
	if got := r.RetryAfter; got < want || got > want+slack {
		t.Errorf("%s: RetryAfter = %v, want %v (+%v)", where, got, want, slack)
	}
}

// testFixedWindowExample is the fixed window's worked example: 2 per 3s.
func testFixedWindowExample(t *testing.T, h Harness) {
	s, c := h.one(t)
	limits := []ratelimit.Limit{ratelimit.Limit{Quota: 2, Window: 3 * time.Second}.Using(ratelimit.FixedWindow)}
	runSteps(t, s, c, uniqueKey(t, "k"), limits, []step{
		{allowed: true, remaining: []int{1}},
		{allowed: true, remaining: []int{0}},
		{allowed: false, remaining: []int{0}, retry: 3 * time.Second},
		{advance: 3 * time.Second, allowed: true, remaining: []int{1}},
		{allowed: true, remaining: []int{0}},
		{advance: 2 * time.Second, allowed: false, remaining: []int{0}, retry: time.Second},
	})
}

// testSlidingLogExample is the sliding log's worked example: two rules, 1
// per second and 5 per minute.
func testSlidingLogExample(t *testing.T, h Harness) {
	s, c := h.one(t)
	if !c.Pinned() {
		redistest.RequireLong(t, 66*time.Second)
	}
	limits := []ratelimit.Limit{
		ratelimit.PerSecond(1).Using(ratelimit.SlidingLog),
		ratelimit.PerMinute(5).Using(ratelimit.SlidingLog),
	}
	runSteps(t, s, c, uniqueKey(t, "k"), limits, []step{
		{allowed: true, remaining: []int{0, 4}},
		// A second request in the same second: the 1/s rule denies it and
		// the 5/min rule keeps its 4.
		{allowed: false, deniedBy: 0, remaining: []int{0, 4}, retry: time.Second},
		{advance: time.Second, allowed: true, remaining: []int{0, 3}},
		{advance: time.Second, allowed: true, remaining: []int{0, 2}},
		{advance: time.Second, allowed: true, remaining: []int{0, 1}},
		{advance: time.Second, allowed: true, remaining: []int{0, 0}},
		// The sixth within the minute: the 5/min rule denies it until the
		// first request, at 0s, leaves the log at 60s.
		{advance: time.Second, allowed: false, deniedBy: 1, remaining: []int{1, 0}, retry: 55 * time.Second},
		{advance: 61 * time.Second, allowed: true, remaining: []int{0, 4}},
	})
}

// testBoundaryBurst shows the fixed window's documented edge burst: a
// client that waits for the window to turn passes almost 2×Quota in a
// moment. The sliding log, given the same traffic, never passes more than
// Quota in any span of one window.
func testBoundaryBurst(t *testing.T, h Harness) {
	const quota = 10
	window := 2 * time.Second
	for _, tt := range []struct {
		algorithm ratelimit.Algorithm
		late      int // admitted just after the boundary
	}{
		{ratelimit.FixedWindow, quota},
		{ratelimit.SlidingLog, 1},
	} {
		t.Run(tt.algorithm.String(), func(t *testing.T) {
			t.Parallel()
			s, c := h.one(t)
			// On a real clock, the burst just before the boundary must end
			// before it: the last of it leaves nothing in the window. When
			// a loaded machine took longer than a tenth of the window for
			// it, the run starts over with a fresh key and twice the
			// window, at most four times.
			w := window
			for attempt := 1; ; attempt, w = attempt+1, 2*w {
				l := ratelimit.Limit{Quota: quota, Window: w}.Using(tt.algorithm)
				key := uniqueKey(t, fmt.Sprintf("k%d", attempt))
				count := func(n int) (passed int, last ratelimit.Decision) {
					for range n {
						last = allow(t, s, key, 1, l)
						if last.Allowed {
							passed++
						}
					}
					return passed, last
				}
				if got, _ := count(1); got != 1 {
					t.Fatalf("first request: got %d passed, want 1", got)
				}
				c.Advance(w * 9 / 10)
				got, last := count(quota - 1)
				if want := quota - 1; got != want {
					t.Fatalf("just before the boundary: got %d passed, want %d", got, want)
				}
				if left := last.Results()[0].Remaining; !c.Pinned() && left != 0 {
					if attempt == 4 {
						t.Fatalf("the burst before the boundary crossed it %d times, the last with a window of %v", attempt, w)
					}
					t.Logf("attempt %d: the burst before the boundary crossed it (%d left in the window after it)", attempt, left)
					continue
				}
				c.Advance(w * 2 / 10)
				if got, _ := count(quota); got != tt.late {
					t.Fatalf("just after the boundary: got %d passed, want %d", got, tt.late)
				}
				t.Logf("%v: %d passed within %v around the boundary (quota %d per %v)", tt.algorithm, quota-1+tt.late, w*2/10, quota, w)
				break
			}
		})
	}
}

// testEdges checks the instant each algorithm frees a unit: 1µs before,
// still denied; at it, allowed. A window is the half-open span
// (now-Window, now], a slot [k×Precision, (k+1)×Precision). A request at
// +1s keeps the keys alive past the edge, so that expiry cannot hide it.
func testEdges(t *testing.T, h Harness) {
	s, c := h.one(t)
	if !c.Pinned() {
		t.Skip("needs a pinned clock to stand on an instant")
	}
	for _, l := range eachAlgorithm() {
		key := uniqueKey(t, l.Algorithm.String())
		allow(t, s, key, 4, l)
		c.Advance(time.Second)
		allow(t, s, key, 1, l)
		// Every algorithm of eachAlgorithm frees a unit 2s after the
		// start: the token bucket has refilled 0.5+0.5 tokens by then.
		c.Advance(time.Second - time.Microsecond)
		if d := allow(t, s, key, 1, l); d.Allowed {
			t.Errorf("%v: allowed 1µs before the edge", l)
		}
		c.Advance(time.Microsecond)
		if d := allow(t, s, key, 1, l); !d.Allowed {
			t.Errorf("%v: denied at the edge; %+v", l, d.Results()[0])
		}
		c.Advance(time.Hour)
	}
}

// eachAlgorithm returns one limit of 5 per window for each algorithm. The
// token bucket refills 5 per 10s so that a slow test machine does not see
// a token come back mid-test.
func eachAlgorithm() []ratelimit.Limit {
	return []ratelimit.Limit{
		ratelimit.Limit{Quota: 5, Window: 2 * time.Second}.Using(ratelimit.FixedWindow),
		ratelimit.Limit{Quota: 5, Window: 2 * time.Second}.Using(ratelimit.SlidingLog),
		ratelimit.Limit{Quota: 5, Window: 2 * time.Second, Precision: 200 * time.Millisecond},
		ratelimit.Limit{Quota: 5, Window: 10 * time.Second}.Using(ratelimit.TokenBucket),
	}
}

// testEachAlgorithm spends each algorithm's quota, then checks that the
// denial's RetryAfter is when the next request passes: exactly, on a
// pinned clock.
func testEachAlgorithm(t *testing.T, h Harness) {
	for _, l := range eachAlgorithm() {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			t.Parallel()
			s, c := h.one(t)
			key := uniqueKey(t, "k")
			for i := range 5 {
				d := allow(t, s, key, 1, l)
				if !d.Allowed || d.Results()[0].Remaining != 4-i {
					t.Fatalf("request %d: got allowed %v remaining %d, want true %d", i, d.Allowed, d.Results()[0].Remaining, 4-i)
				}
			}
			d := allow(t, s, key, 1, l)
			if d.Allowed || d.Results()[0].Remaining != 0 {
				t.Fatalf("request 5: got allowed %v remaining %d, want false 0", d.Allowed, d.Results()[0].Remaining)
			}
			retry := d.RetryAfter
			if c.Pinned() {
				// Every algorithm frees its first unit 2s after the start
				// (the token bucket refills one per 2s).
				checkRetry(t, "request 5", d.Results()[0], 2*time.Second)
				c.Advance(retry - time.Microsecond)
				if d := allow(t, s, key, 1, l); d.Allowed {
					t.Fatalf("1µs before RetryAfter %v: allowed, want denied", retry)
				}
				c.Advance(time.Microsecond)
			} else {
				c.Advance(retry + realMargin)
			}
			if d := allow(t, s, key, 1, l); !d.Allowed {
				t.Fatalf("after RetryAfter %v: denied, want allowed; %+v", retry, d.Results()[0])
			}
		})
	}
}

// testCost checks weighted requests: a cost of n takes n units.
func testCost(t *testing.T, h Harness) {
	for _, l := range eachAlgorithm() {
		l.Quota, l.Window, l.Precision = 10, time.Hour, 0
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			t.Parallel()
			s, c := h.one(t)
			runSteps(t, s, c, uniqueKey(t, "k"), []ratelimit.Limit{l}, []step{
				{cost: 3, allowed: true, remaining: []int{7}},
				{cost: 3, allowed: true, remaining: []int{4}},
				{cost: 3, allowed: true, remaining: []int{1}},
				{cost: 3, allowed: false, remaining: []int{1}},
				{cost: 1, allowed: true, remaining: []int{0}},
				{cost: 1, allowed: false, remaining: []int{0}},
			})
		})
	}
}

// testMultiLimitAllOrNothing pairs every algorithm with every other: a
// request denied by one limit takes nothing from the other.
func testMultiLimitAllOrNothing(t *testing.T, h Harness) {
	for _, a := range eachAlgorithm() {
		for _, b := range eachAlgorithm() {
			tight := a
			tight.Quota, tight.Window, tight.Precision = 2, time.Hour, 0
			loose := b
			loose.Quota, loose.Window, loose.Precision = 100, 2*time.Hour, 0
			t.Run(a.Algorithm.String()+"+"+b.Algorithm.String(), func(t *testing.T) {
				t.Parallel()
				s, c := h.one(t)
				limits := []ratelimit.Limit{tight, loose}
				runSteps(t, s, c, uniqueKey(t, "k"), limits, []step{
					{allowed: true, remaining: []int{1, 99}},
					{allowed: true, remaining: []int{0, 98}},
					{allowed: false, deniedBy: 0, remaining: []int{0, 98}},
					{allowed: false, deniedBy: 0, remaining: []int{0, 98}},
				})
				// The loose limit alone still has its 98.
				if d := allow(t, s, uniqueKey(t, "k"), 1, loose); d.Results()[0].Remaining != 97 {
					t.Errorf("loose limit alone: got remaining %d, want 97", d.Results()[0].Remaining)
				}
				// Reversed order: the answer names the limit that denied.
				d := allow(t, s, uniqueKey(t, "k"), 1, loose, tight)
				if r, denied := deniedBy(d); !denied || r.Limit != tight {
					t.Errorf("reversed: denied by %v, %v; want %v, true", r.Limit, denied, tight)
				}
				if !d.Results()[0].Allowed || d.Results()[0].RetryAfter != 0 {
					t.Errorf("reversed: the loose limit's result is %+v, want allowed", d.Results()[0])
				}
			})
		}
	}
}

// testKeysAreIndependent checks that one key's traffic leaves another's
// alone, including keys that differ only in characters special to Redis.
func testKeysAreIndependent(t *testing.T, h Harness) {
	s, _ := h.one(t)
	l := ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow)
	keys := []string{"a", "b", "a}", "{a}", "a:", "a b", "é", "a\x00"}
	for _, k := range keys {
		if d := allow(t, s, uniqueKey(t, k), 1, l); !d.Allowed {
			t.Errorf("first request of key %q: denied, want allowed", k)
		}
	}
	for _, k := range keys {
		if d := allow(t, s, uniqueKey(t, k), 1, l); d.Allowed {
			t.Errorf("second request of key %q: allowed, want denied", k)
		}
	}
}

// testNameIsNotState checks that a limit's Name labels it and nothing
// more: the same limit under two names counts into one state, for every
// algorithm.
func testNameIsNotState(t *testing.T, h Harness) {
	s, _ := h.one(t)
	for _, l := range []ratelimit.Limit{
		ratelimit.Limit{Quota: 2, Window: time.Hour}.Using(ratelimit.FixedWindow),
		ratelimit.Limit{Quota: 2, Window: time.Hour}.Using(ratelimit.SlidingLog),
		ratelimit.Limit{Quota: 2, Window: time.Hour},
		ratelimit.Limit{Quota: 2, Window: time.Hour}.Using(ratelimit.TokenBucket),
	} {
		key := uniqueKey(t, l.Algorithm.String())
		allow(t, s, key, 1, l.Named("first"))
		allow(t, s, key, 1, l.Named("second"))
		if d := allow(t, s, key, 1, l); d.Allowed {
			t.Errorf("%v: a third request under a third name was allowed, want denied: names share one state", l)
		}
	}
}

// testReset checks that Reset forgets exactly the limits it is given.
func testReset(t *testing.T, h Harness) {
	s, _ := h.one(t)
	key := uniqueKey(t, "k")
	all := eachAlgorithm()
	for i := range all {
		all[i].Quota, all[i].Window, all[i].Precision = 1, time.Hour, 0
	}
	allow(t, s, key, 1, all...)
	if d := allow(t, s, key, 1, all...); d.Allowed {
		t.Fatalf("second request: allowed, want denied")
	}
	if err := s.Reset(context.Background(), key, limitsOf(t, all[:3]...)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	d := allow(t, s, key, 1, all...)
	for i, res := range d.Results() {
		if want := i < 3; res.Allowed != want {
			t.Errorf("after Reset of limits 0-2: Results[%d].Allowed = %v, want %v", i, res.Allowed, want)
		}
	}
	if err := s.Reset(context.Background(), "", limitsOf(t, all...)); !isInvalid(err) {
		t.Errorf("Reset with an empty key: got %v, want ErrInvalid", err)
	}
}

// testInvalidInput checks that a request that can never pass is refused
// with an error naming what is wrong, before the store counts anything.
func testInvalidInput(t *testing.T, h Harness) {
	s, _ := h.one(t)
	refusesInvalid(t, s.Allow)
	// Nothing was counted: the whole quota is still there.
	if d := allow(t, s, "k", 10, ratelimit.PerMinute(10)); !d.Allowed {
		t.Errorf("a request of the whole quota after the refusals: denied, want allowed")
	}
}

// refusesInvalid sends call, a store's Allow or Peek, requests that can
// never pass, and wants each refused with an error wrapping ErrInvalid
// that names what is wrong.
func refusesInvalid(t *testing.T, call func(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error)) {
	t.Helper()
	minute := limitsOf(t, ratelimit.PerMinute(10))
	bucket := limitsOf(t, ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 10, Window: time.Minute, Burst: 3})
	tests := []struct {
		name   string
		key    string
		cost   int
		limits *ratelimit.Limits
		want   string // in the error message
	}{
		{"empty key", "", 1, minute, "key is empty"},
		{"long key", strings.Repeat("k", 1025), 1, minute, "key is 1025 bytes long"},
		{"zero cost", "k", 0, minute, "cost must be at least 1"},
		{"negative cost", "k", -5, minute, "cost must be at least 1"},
		{"cost above quota", "k", 11, minute, "exceeds the capacity 10"},
		{"cost above burst", "k", 4, bucket, "exceeds the capacity 3"},
		{"nil limits", "k", 1, nil, "limits are nil"},
		{"zero limits", "k", 1, &ratelimit.Limits{}, "limits are nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := call(context.Background(), tt.key, tt.cost, tt.limits)
			if !isInvalid(err) {
				t.Fatalf("got (%+v, %v), want an error wrapping ErrInvalid", d, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

// deniedBy returns the result of the limit that denied d and lets the
// request through last (the longest RetryAfter); ok is false when d
// allowed.
func deniedBy(d ratelimit.Decision) (r ratelimit.Result, ok bool) {
	for _, x := range d.Results() {
		if !x.Allowed && (!ok || x.RetryAfter > r.RetryAfter) {
			r, ok = x, true
		}
	}
	return r, ok
}
