package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
)

// fakeClock is a pinned clock for Memory stores.
type fakeClock = testkit.Clock

func newMemory(t testing.TB, clock *fakeClock, opts MemoryOptions) *memory.Store {
	t.Helper()
	opts.Clock = clock.Now
	m, err := memory.New(opts.internal())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMemoryConformance(t *testing.T) {
	t.Parallel() // a pinned clock: nothing here depends on the machine's speed
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
		clock := testkit.NewClock(epoch, nil)
		m := newMemory(t, clock, MemoryOptions{})
		stores := make([]ratelimit.Store, n)
		for i := range stores {
			stores[i] = m
		}
		return stores, clock
	}})
}

// TestMemoryMatchesRedis replays the same random traffic, on one pinned
// clock, through the Memory store and the Redis store on miniredis: every
// decision, and every Peek before it, must be the same, field by field,
// for every algorithm alone and for random mixes of them.
func TestMemoryMatchesRedis(t *testing.T) {
	t.Parallel() // a pinned clock: nothing here depends on the machine's speed
	windows := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second, time.Minute}
	for _, mix := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket", "mixed"} {
		t.Run(mix, func(t *testing.T) {
			t.Parallel()
			mini, pinned := newMiniredis(t)
			clock := testkit.NewClock(epoch, mini.SetTime)
			_ = pinned
			redisStore := newStore(t, newClient(t, mini.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
			mem := newMemory(t, clock, MemoryOptions{})
			rng := rand.New(rand.NewPCG(7, uint64(len(mix))))
			peeks := rand.New(rand.NewPCG(8, uint64(len(mix)))) // apart, so the traffic stays the same
			decisions := 0
			for round := range traffic(40) {
				var limits []ratelimit.Limit
				for n := 1 + rng.IntN(3); len(limits) < n; {
					l := randomLimit(rng, windows)
					l.Quota = 1 + rng.IntN(10)
					if mix != "mixed" {
						l.Algorithm = algorithmNamed(t, mix)
						if l.Algorithm != ratelimit.SlidingWindow {
							l.Precision = 0
						}
						if l.Algorithm != ratelimit.TokenBucket {
							l.Burst = 0
						}
					}
					if _, err := ratelimit.NewLimits(append(limits, l)...); err == nil {
						limits = append(limits, l)
					}
				}
				set := limitsOf(t, limits...)
				most := capacity(limits[0])
				for _, l := range limits {
					most = min(most, capacity(l))
				}
				keys := []string{fmt.Sprintf("r%d-a", round), fmt.Sprintf("r%d-b", round)}
				for range 100 {
					switch rng.IntN(5) {
					case 0:
					case 1:
						clock.Advance(time.Duration(1+rng.IntN(2000)) * time.Microsecond)
					case 2:
						clock.Advance(limits[rng.IntN(len(limits))].Window)
					default:
						clock.Advance(time.Duration(rng.Int64N(int64(windows[len(windows)-1]) / 20)).Truncate(time.Microsecond))
					}
					key, cost := keys[rng.IntN(2)], 1
					if rng.IntN(3) == 0 {
						cost = 1 + rng.IntN(most)
					}
					if peeks.IntN(4) == 0 { // a peek before one decision in four
						peekMatches(t, redisStore, mem, keys[peeks.IntN(2)], 1+peeks.IntN(most), set)
					}
					want, err := redisStore.Allow(context.Background(), key, cost, set)
					if err != nil {
						t.Fatal(err)
					}
					got, err := mem.Allow(context.Background(), key, cost, set)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("round %d, %v cost %d at %v:\nmemory %+v\nredis  %+v", round, limits, cost, clock.Now(), got, want)
					}
					decisions++
				}
			}
			t.Logf("%d decisions, all equal", decisions)
		})
	}
}

// peekMatches fails t unless the Redis and the Memory stores answer the
// same Peek alike.
func peekMatches(t *testing.T, redisStore *Redis, mem *memory.Store, key string, cost int, set *ratelimit.Limits) {
	t.Helper()
	want, err := redisStore.Peek(context.Background(), key, cost, set)
	if err != nil {
		t.Fatalf("Redis: Peek: %v", err)
	}
	got, err := mem.Peek(context.Background(), key, cost, set)
	if err != nil {
		t.Fatalf("Memory: Peek: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Peek(%q, %d) under %v:\nmemory %+v\nredis  %+v", key, cost, set.All()[0], got, want)
	}
}

// TestMemoryMatchesRedisSharedState replays traffic in which limits that
// share one state, by algorithm and window, differ in quota, burst or
// name from request to request, as when two routes limit one key alike:
// the Memory store must still decide, and peek, as the Redis store does,
// down to when a key expires and starts afresh.
func TestMemoryMatchesRedisSharedState(t *testing.T) {
	t.Parallel() // a pinned clock: nothing here depends on the machine's speed
	for a := range 4 {
		algorithm := ratelimit.Algorithm(a)
		t.Run(algorithm.String(), func(t *testing.T) {
			t.Parallel()
			mini, _ := newMiniredis(t)
			clock := testkit.NewClock(epoch, mini.SetTime)
			redisStore := newStore(t, newClient(t, mini.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
			mem := newMemory(t, clock, MemoryOptions{})
			rng := rand.New(rand.NewPCG(21, uint64(a)))
			peeks := rand.New(rand.NewPCG(22, uint64(a))) // apart, so the traffic stays the same
			ctx := context.Background()
			var lastReset time.Duration // of the last allowed request
			for step := range traffic(5000) {
				l := ratelimit.Limit{Algorithm: algorithm, Quota: 1 + rng.IntN(6), Window: 2977 * time.Millisecond}
				switch algorithm {
				case ratelimit.TokenBucket:
					l.Burst = 1 + rng.IntN(45) // the state depends on quota and window only
					l.Quota = 2
				case ratelimit.SlidingWindow:
					l.Precision = l.Window / 13
				}
				if rng.IntN(4) == 0 {
					l.Name = "other"
				}
				switch rng.IntN(6) {
				case 0, 1:
					clock.Advance(time.Duration(rng.IntN(3_000_000)) * time.Microsecond)
				case 2:
					// To just after the state is full again: Redis's key
					// lives to the next whole millisecond.
					clock.Advance(lastReset + time.Duration(rng.IntN(1000))*time.Microsecond)
				}
				cost := 1 + rng.IntN(capacity(l))
				// A set of its own for each request, as two routes
				// limiting one key alike have.
				set := limitsOf(t, l)
				if peeks.IntN(4) == 0 { // a peek before one decision in four
					peekMatches(t, redisStore, mem, "k", 1+peeks.IntN(capacity(l)), set)
				}
				want, err := redisStore.Allow(ctx, "k", cost, set)
				if err != nil {
					t.Fatal(err)
				}
				got, err := mem.Allow(ctx, "k", cost, set)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d, %v cost %d at %v:\nmemory %+v\nredis  %+v", step, l, cost, clock.Now().Sub(epoch), got, want)
				}
				if got.Allowed {
					lastReset = got.Results()[0].ResetAfter
				}
			}
		})
	}
}

// TestMemoryPeekAddsNoKey peeks at keys the store does not hold: each has
// all of every limit left, and none is added, so that peeking can never
// evict a key.
func TestMemoryPeekAddsNoKey(t *testing.T) {
	clock := testkit.NewClock(epoch, nil)
	m := newMemory(t, clock, MemoryOptions{MaxKeys: 10})
	set := limitsOf(t, everyAlgorithm...)
	if _, err := m.Allow(context.Background(), "held", 1, set); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		d, err := m.Peek(context.Background(), fmt.Sprintf("new-%d", i), 1, set)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range d.Results() {
			if !r.Allowed || r.Remaining != 10 || r.ResetAfter != 0 || r.RetryAfter != 0 {
				t.Fatalf("Peek of a key not held: %v: got %+v, want all 10 left and nothing to wait for", r.Limit, r)
			}
		}
	}
	if n := m.Len(); n != 1 {
		t.Errorf("the store holds %d keys after the Peeks, want 1", n)
	}
	if d, err := m.Peek(context.Background(), "held", 1, set); err != nil || d.Results()[0].Remaining != 9 {
		t.Errorf("the key held: got %+v, %v; want 9 left", d, err)
	}
}

// TestMemoryOneLimitAllocatesNothing decides a held key under one limit of
// each algorithm, allowed and then denied: the decision holds its one
// result inline, so Allow allocates nothing.
func TestMemoryOneLimitAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	for _, l := range everyAlgorithm {
		t.Run(l.String(), func(t *testing.T) {
			m := newMemory(t, testkit.NewClock(epoch, nil), MemoryOptions{})
			set := limitsOf(t, l)
			m.Allow(ctx, "k", 1, set) // the key's state is made once
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := m.Allow(ctx, "k", 1, set); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("got %v allocations per Allow, want 0", allocs)
			}
		})
	}
}

// TestMemoryIsBounded floods a small store with new keys: it never holds
// more than its maximum, and every new key's first request passes.
func TestMemoryIsBounded(t *testing.T) {
	clock := testkit.NewClock(epoch, nil)
	const maxKeys = 200
	m := newMemory(t, clock, MemoryOptions{MaxKeys: maxKeys})
	l := limitsOf(t, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow))
	for i := range 20_000 {
		d, err := m.Allow(context.Background(), fmt.Sprintf("flood-%d", i), 1, l)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Fatalf("new key %d denied: a full store must not deny everyone", i)
		}
		if n := m.Len(); n > maxKeys {
			t.Fatalf("after %d keys the store holds %d, want at most %d", i+1, n, maxKeys)
		}
	}
}

// TestMemoryEvictsExpiredFirst fills a store with short-lived keys and one
// long-lived key; once the short ones expire, new keys replace them and
// the long-lived key keeps its count.
func TestMemoryEvictsExpiredFirst(t *testing.T) {
	clock := testkit.NewClock(epoch, nil)
	m := newMemory(t, clock, MemoryOptions{MaxKeys: 64})
	ctx := context.Background()
	long := limitsOf(t, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow))
	short := limitsOf(t, ratelimit.Limit{Quota: 1, Window: 10 * time.Millisecond}.Using(ratelimit.FixedWindow))
	m.Allow(ctx, "keep", 1, long)
	for i := 0; m.Len() < 64 && i < 10_000; i++ {
		m.Allow(ctx, fmt.Sprintf("short-%d", i), 1, short)
	}
	clock.Advance(20 * time.Millisecond)
	for i := range 40 {
		m.Allow(ctx, fmt.Sprintf("new-%d", i), 1, long)
	}
	if d, _ := m.Allow(ctx, "keep", 1, long); d.Allowed {
		t.Error("the long-lived key was evicted while expired keys were there to go")
	}
}

var algorithmNamed = testkit.AlgorithmNamed
