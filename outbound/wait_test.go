package outbound

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
	"github.com/redis/go-redis/v9"
)

// fakeClock is a clock that moves only when Wait sleeps on it, shared by
// a Memory store and Wait.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	slept  []time.Duration
	asleep func() // called after each sleep, for tests that act meanwhile
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.slept = append(c.slept, d)
	c.mu.Unlock()
	if c.asleep != nil {
		c.asleep()
	}
	return ctx.Err()
}

// useFakeClock makes a Memory store and Wait share a fake clock.
func useFakeClock(t *testing.T) (*fakeClock, ratelimit.Store) {
	t.Helper()
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	oldNow, oldSleep := waitNow, waitSleep
	waitNow, waitSleep = c.now, c.sleep
	t.Cleanup(func() { waitNow, waitSleep = oldNow, oldSleep })
	s, err := store.NewMemory(store.MemoryOptions{Clock: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// TestWaitIsExact: on every algorithm, after random spending, Wait sleeps
// exactly as long as the reference model says the cost takes to fit, in
// one sleep, and is then admitted. Not parallel: it sets Wait's clock.
func TestWaitIsExact(t *testing.T) {
	limits := []ratelimit.Limit{
		ratelimit.Limit{Quota: 5, Window: 2 * time.Second}.Using(ratelimit.FixedWindow),
		ratelimit.Limit{Quota: 5, Window: 2 * time.Second}.Using(ratelimit.SlidingLog),
		{Quota: 5, Window: 2 * time.Second, Precision: 200 * time.Millisecond},
		ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 3, Window: time.Second, Burst: 5},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range limits {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			clock, s := useFakeClock(t)
			set, err := ratelimit.NewLimits(l)
			if err != nil {
				t.Fatal(err)
			}
			var model storetest.Model
			ctx := context.Background()
			for round := range 200 {
				key := "k"
				// Spend at random, moving the clock a little between requests.
				for range rng.IntN(8) {
					cost := 1 + rng.IntN(2)
					at := clock.now().UnixMicro()
					want := model.Allow(at, key, cost, l)
					got, err := s.Allow(ctx, key, cost, set)
					if err != nil || got.Allowed != want.Allowed {
						t.Fatalf("round %d: Allow = %v, %v; model says %v", round, got.Allowed, err, want.Allowed)
					}
					clock.sleep(ctx, time.Duration(rng.IntN(300))*time.Millisecond)
				}
				cost := 1 + rng.IntN(3)
				expect := model.Allow(clock.now().UnixMicro(), key, cost, l)
				clock.slept = nil
				d, err := waitFor(ctx, s, key, cost, set, 0)
				if err != nil || !d.Allowed {
					t.Fatalf("round %d: Wait = %+v, %v; want allowed", round, d, err)
				}
				if expect.Allowed {
					if len(clock.slept) != 0 {
						t.Fatalf("round %d: the cost fit at once, but Wait slept %v", round, clock.slept)
					}
					continue
				}
				if want := []time.Duration{expect.RetryAfter}; len(clock.slept) != 1 || clock.slept[0] != want[0] {
					t.Fatalf("round %d: Wait slept %v, want %v: exactly the model's retry time, once", round, clock.slept, want)
				}
				// The model takes the cost at the time Wait was admitted.
				if m := model.Allow(clock.now().UnixMicro(), key, cost, l); !m.Allowed {
					t.Fatalf("round %d: the model denies at the time Wait was admitted", round)
				}
			}
		})
	}
}

// TestWaitNeverSleepsPastTheDeadline: when the next chance lies beyond the
// context's deadline or maxWait, Wait returns at once, without sleeping.
// Not parallel: it sets Wait's clock.
func TestWaitNeverSleepsPastTheDeadline(t *testing.T) {
	clock, s := useFakeClock(t)
	set, err := ratelimit.NewLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(context.Background(), s, "k", 1, set, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(30*time.Second))
	defer cancel()
	for _, tt := range []struct {
		name    string
		ctx     context.Context
		maxWait time.Duration
	}{
		{"deadline", ctx, 0},
		{"maxWait", context.Background(), 59 * time.Second},
	} {
		clock.slept = nil
		d, err := waitFor(tt.ctx, s, "k", 1, set, tt.maxWait)
		if d.Allowed || !errors.Is(err, context.DeadlineExceeded) || len(clock.slept) != 0 {
			t.Errorf("%s: got allowed %v, %v, slept %v; want a denial wrapping DeadlineExceeded, no sleep", tt.name, d.Allowed, err, clock.slept)
		}
	}
	// A maxWait long enough waits.
	clock.slept = nil
	if d, err := waitFor(context.Background(), s, "k", 1, set, 61*time.Second); err != nil || !d.Allowed || len(clock.slept) != 1 {
		t.Errorf("maxWait 61s: got allowed %v, %v, slept %v; want allowed after one sleep", d.Allowed, err, clock.slept)
	}
}

// TestWaitRetriesWhenOthersSpend: someone else takes the unit Wait was
// waiting for; Wait sleeps again, and is admitted at the next chance. Not
// parallel: it sets Wait's clock.
func TestWaitRetriesWhenOthersSpend(t *testing.T) {
	clock, s := useFakeClock(t)
	set, err := ratelimit.NewLimits(ratelimit.Limit{Quota: 1, Window: time.Second}.Using(ratelimit.SlidingLog))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.Allow(ctx, "k", 1, set)
	clock.asleep = func() {
		clock.asleep = nil
		if d, _ := s.Allow(ctx, "k", 1, set); !d.Allowed {
			t.Errorf("the other caller was denied")
		}
	}
	d, err := waitFor(ctx, s, "k", 1, set, 0)
	if err != nil || !d.Allowed || len(clock.slept) != 2 || clock.slept[0] != time.Second || clock.slept[1] != time.Second {
		t.Errorf("got allowed %v, %v, slept %v; want allowed after two sleeps of 1s", d.Allowed, err, clock.slept)
	}
}

// TestWaitInvalid: invalid input is refused before anything is counted.
func TestWaitInvalid(t *testing.T) {
	t.Parallel()
	s := newMemory(t)
	set, err := ratelimit.NewLimits(ratelimit.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		cost    int
		maxWait time.Duration
	}{{"cost above the quota", 3, 0}, {"negative maxWait", 1, -time.Second}} {
		if _, err := waitFor(context.Background(), s, "k", tt.cost, set, tt.maxWait); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tt.name, err)
		}
	}
	if d, _ := s.Allow(context.Background(), "k", 2, set); !d.Allowed {
		t.Errorf("after the refusals the whole quota is not there: something was counted")
	}
}

// TestWaitOnRedis: on a real Redis and the real clock, Wait is admitted on
// every algorithm once the time the store gave has passed, and returns
// when its context is canceled while it sleeps.
//
// Its limits are short (300ms), so a loaded machine can be slower than
// them: the times are measured, not assumed. The request that finds the
// limit spent must be denied if it ended before the soonest a spent unit
// can come back (a new key is tried when it was slower); the wait is
// measured from before that request was sent, so that it covers all of
// the time Redis gave however late its answer came back.
func TestWaitOnRedis(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	s := newRedisStore(t, c, prefix)
	for _, tt := range []struct {
		limit ratelimit.Limit
		// soonest a unit spent by the first request can come back
		soonest time.Duration
	}{
		{ratelimit.Limit{Quota: 2, Window: 300 * time.Millisecond}.Using(ratelimit.FixedWindow), 300 * time.Millisecond},
		{ratelimit.Limit{Quota: 2, Window: 300 * time.Millisecond}.Using(ratelimit.SlidingLog), 300 * time.Millisecond},
		// Its units leave with their slot, which may have begun a
		// precision before the first request.
		{ratelimit.Limit{Quota: 2, Window: 300 * time.Millisecond, Precision: 30 * time.Millisecond}, 270 * time.Millisecond},
		// A unit every 150ms.
		{ratelimit.Limit{Quota: 2, Window: 300 * time.Millisecond}.Using(ratelimit.TokenBucket), 150 * time.Millisecond},
	} {
		l := tt.limit
		set, err := ratelimit.NewLimits(l)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		const tries = 5
		var sent time.Time
		var key string
		var first time.Duration
		for try := 1; ; try++ {
			key = fmt.Sprintf("wait:%v:%d", l.Algorithm, try)
			began := time.Now()
			if d, err := s.Allow(ctx, key, 2, set); err != nil || !d.Allowed {
				t.Fatalf("%v: the first request: got allowed %v, %v; want allowed", l, d.Allowed, err)
			}
			sent = time.Now()
			d, err := s.Allow(ctx, key, 1, set)
			if err != nil {
				t.Fatalf("%v: the second request: %v", l, err)
			}
			if !d.Allowed {
				if first = d.RetryAfter; first <= 0 {
					t.Fatalf("%v: the second request was denied with RetryAfter %v, want more than 0", l, first)
				}
				break
			}
			// Less a millisecond or two between Redis's clock and ours.
			took := time.Since(began)
			if took < tt.soonest-2*time.Millisecond {
				t.Fatalf("%v: the spent limit admitted more %v after it was spent, before the %v a unit takes to come back", l, took, tt.soonest)
			}
			if try == tries {
				t.Fatalf("%v: %d times the two requests took longer than the %v a unit takes to come back (the last %v)", l, tries, tt.soonest, took)
			}
		}
		d, err := waitFor(ctx, s, key, 1, set, 5*time.Second)
		if err != nil || !d.Allowed {
			t.Errorf("%v: Wait = %v, %v; want allowed", l, d.Allowed, err)
		}
		// Redis's clock and this process's timer may differ by a
		// millisecond; the wait is never much shorter than Redis said.
		if elapsed := time.Since(sent); elapsed < first-2*time.Millisecond {
			t.Errorf("%v: admitted %v after the request that Redis told to wait %v was sent", l, elapsed, first)
		}
	}
	set, _ := ratelimit.NewLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow))
	s.Allow(context.Background(), "wait:cancel", 1, set)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := waitFor(ctx, s, "wait:cancel", 1, set, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled while waiting a minute: got %v, want context.Canceled", err)
	}
}

// newMemory returns a Memory store with the default options.
func newMemory(t testing.TB) ratelimit.Store {
	t.Helper()
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var prefixes atomic.Int64

// sharedRedis returns a new client of the shared redis-server and a key
// prefix no other test uses.
func sharedRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c, fmt.Sprintf("wait%d:", prefixes.Add(1))
}

func newRedisStore(t *testing.T, c store.RedisClient, prefix string) *store.Redis {
	t.Helper()
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: prefix})
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	return s
}
