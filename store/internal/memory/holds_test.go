package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
)

var tokens = ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 10, Window: time.Hour, Usage: true}

// remaining returns a function that returns what a decision leaves of
// its first limit, failing t on an error.
func remaining(t *testing.T) func(ratelimit.Decision, error) int {
	return func(d ratelimit.Decision, err error) int {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d.Results()[0].Remaining
	}
}

// TestHoldsAreBounded fills one limit's holds to maxHolds: the next
// request is denied as if the limit were full, with nothing remaining,
// told to retry when the soonest hold lapses (within a second), and Peek
// agrees; a settle gives its hold's place back (its mark does not count
// against the bound), and room for all comes back when the holds lapse.
func TestHoldsAreBounded(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(epoch, nil)
	m := newMemory(t, clock, Options{})
	ctx := context.Background()
	set := limitsOf(t, ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 2 * maxHolds, Window: time.Hour, Usage: true})
	var first ratelimit.Decision
	for i := range maxHolds {
		d, err := m.Allow(ctx, "k", 1, set)
		if err != nil || !d.Allowed {
			t.Fatalf("hold %d: got %+v, %v; want allowed", i, d, err)
		}
		if i == 0 {
			first = d
		}
	}
	clock.Advance(spec.HoldLife - 300*time.Millisecond)
	for _, call := range []func(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error){m.Peek, m.Allow} {
		d, err := call(ctx, "k", 1, set)
		if err != nil {
			t.Fatal(err)
		}
		if r := d.Results()[0]; d.Allowed || r.Remaining != 0 || r.RetryAfter != 300*time.Millisecond {
			t.Fatalf("with %d holds: got %+v; want denied, nothing left, retry when the first lapses", maxHolds, d.Results())
		}
	}
	if _, err := m.End(ctx, "k", 1, set, first); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.Allow(ctx, "k", 1, set); !d.Allowed {
		t.Fatalf("after a settle: denied, want its hold's place taken: %+v", d.Results())
	}
	if d, _ := m.Allow(ctx, "k", 1, set); d.Allowed {
		t.Fatalf("with %d holds again: allowed, want denied", maxHolds)
	}
	k := m.lookup("k")
	if h := k.entry(&limitset.Compile(set).Limits[0]).held; len(h.entries)+len(h.marks) != maxHolds+1 {
		n := len(h.entries) + len(h.marks)
		t.Fatalf("%d holds and marks kept, want %d holds and a mark", n, maxHolds)
	}
	clock.Advance(300 * time.Millisecond)
	if d, _ := m.Allow(ctx, "k", 1, set); !d.Allowed || d.Results()[0].Remaining != 2*maxHolds-1-1-1 {
		t.Fatalf("when the first holds lapse: got %+v, want allowed with 1 charged and 2 held", d.Results())
	}
}

// TestHoldsAreRenewedUntilSettled: a request's holds are in the store's
// table of holds to renew from Decide to Settle, whatever the limits it
// ends under, with the id of its Concurrent slot; a request that holds
// nothing is not.
func TestHoldsAreRenewedUntilSettled(t *testing.T) {
	t.Parallel()
	m := newMemory(t, testkit.NewClock(epoch, nil), Options{})
	ctx := context.Background()
	set := limitsOf(t, ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 5}, tokens)
	d, err := m.Allow(ctx, "k", 4, set)
	if err != nil || !d.Allowed {
		t.Fatalf("got %+v, %v; want allowed", d, err)
	}
	holds, held := m.holds.Held(), m.slots.Held()
	if len(holds) != 1 || len(held) != 1 || holds[0].ID != held[0].ID || fmt.Sprint(holds[0].ID) != d.Slot || holds[0].Limit != nil {
		t.Fatalf("holds %+v, slots %+v, Slot %q: want one of each, under the request's one id", holds, held, d.Slot)
	}
	if _, err := m.End(ctx, "k", 2, set, d); err != nil {
		t.Fatal(err)
	}
	if n, s := len(m.holds.Held()), len(m.slots.Held()); n != 0 || s != 0 {
		t.Fatalf("after End: %d holds and %d slots to renew, want none", n, s)
	}
	if _, err := m.Allow(ctx, "other", 4, limitsOf(t, ratelimit.PerMinute(10))); err != nil || len(m.holds.Held()) != 0 {
		t.Fatalf("a request that holds nothing: %d holds to renew, %v; want none", len(m.holds.Held()), err)
	}
	// Ended under limits none of which is charged from usage, its hold is
	// renewed no more, and lapses.
	if d, err = m.Allow(ctx, "k", 4, limitsOf(t, tokens)); err != nil || len(m.holds.Held()) != 1 {
		t.Fatalf("got %+v, %v, %d holds to renew; want one", d, err, len(m.holds.Held()))
	}
	if _, err := m.End(ctx, "k", 0, limitsOf(t, ratelimit.PerMinute(10)), d); err != nil || len(m.holds.Held()) != 0 {
		t.Fatalf("after End under other limits: %d holds to renew, %v; want none", len(m.holds.Held()), err)
	}
}

// TestPeekFromSpentCountsHolds: a Peek as a Fallback's seed will make the
// state still counts the holds of the state the store has, and Charge
// charges beside them, settling none.
func TestPeekFromSpentCountsHolds(t *testing.T) {
	t.Parallel()
	m := newMemory(t, testkit.NewClock(epoch, nil), Options{})
	ctx := context.Background()
	set, left := limitsOf(t, tokens), remaining(t)
	if got := left(m.Allow(ctx, "k", 4, set)); got != 6 {
		t.Fatalf("Allow(4): %d left, want 6", got)
	}
	given, compiled, err := limitset.Check("k", 1, set)
	if err != nil {
		t.Fatal(err)
	}
	if d := m.PeekFrom(Peek{Key: "k", Cost: 1, Limits: given, Set: compiled, Spent: []int64{3}}); d.Results()[0].Remaining != 3 {
		t.Fatalf("Peek seeded with 3 spent: got %+v, want 3 left: 3 spent and 4 held", d.Results())
	}
	m.Charge("k", 2, compiled)
	if got := left(m.Peek(ctx, "k", 1, set)); got != 4 {
		t.Fatalf("after Charge(2): %d left, want 4: 2 charged and 4 still held", got)
	}
}

// TestHoldsKeepTheirKey: a key whose only state is a hold (its limit
// charged from usage has taken nothing) is kept while the hold lives,
// ahead of keys that have nothing left to keep.
func TestHoldsKeepTheirKey(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(epoch, nil)
	m := newMemory(t, clock, Options{MaxKeys: 64})
	ctx := context.Background()
	set, short := limitsOf(t, tokens), limitsOf(t, ratelimit.Limit{Quota: 1, Window: 10 * time.Millisecond}.Using(ratelimit.FixedWindow))
	left := remaining(t)
	m.Allow(ctx, "held", 4, set)
	for i := 0; m.Len() < 64 && i < 10_000; i++ {
		m.Allow(ctx, fmt.Sprintf("short-%d", i), 1, short)
	}
	clock.Advance(20 * time.Millisecond)
	for i := range 40 {
		m.Allow(ctx, fmt.Sprintf("new-%d", i), 1, short)
	}
	if got := left(m.Peek(ctx, "held", 1, set)); got != 6 {
		t.Fatalf("the key holding 4: %d left, want 6: it was evicted while expired keys were there to go", got)
	}
}

// TestMarksAreBounded: a key keeps the marks of its newest maxHolds
// settles, as end.lua does: a second settle of the oldest, past them,
// charges again, one of the newest does not; and however many settles
// there are, a decision reads the holds alone.
func TestMarksAreBounded(t *testing.T) {
	t.Parallel()
	m := newMemory(t, testkit.NewClock(epoch, nil), Options{})
	ctx := context.Background()
	set := limitsOf(t, ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 1_000_000, Window: time.Hour, Usage: true})
	left := remaining(t)
	ds := make([]ratelimit.Decision, maxHolds+1)
	for i := range ds {
		d, err := m.Allow(ctx, "k", 1, set)
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
		ds[i] = d
		if _, err := m.End(ctx, "k", 1, set, d); err != nil {
			t.Fatal(err)
		}
	}
	before := left(m.Peek(ctx, "k", 1, set))
	if want := 1_000_000 - maxHolds - 1; before != want {
		t.Fatalf("after %d settles, %d left; want %d", maxHolds+1, before, want)
	}
	m.End(ctx, "k", 1, set, ds[maxHolds]) // the newest: settled, takes nothing
	if n := left(m.Peek(ctx, "k", 1, set)); n != before {
		t.Errorf("a second settle of the newest took %d; want 0", before-n)
	}
	m.End(ctx, "k", 1, set, ds[0]) // the oldest: its mark is gone
	if n := left(m.Peek(ctx, "k", 1, set)); n != before-1 {
		t.Errorf("a second settle of the oldest, past the bound, took %d; want 1", before-n)
	}
	h := m.lookup("k").entry(&limitset.Compile(set).Limits[0]).held
	if len(h.marks) != maxHolds || len(h.entries) != 0 || len(h.order)-h.head != maxHolds {
		t.Errorf("%d marks (%d in order), %d holds; want %d marks, no hold", len(h.marks), len(h.order)-h.head, len(h.entries), maxHolds)
	}
}
