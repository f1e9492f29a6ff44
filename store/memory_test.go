package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/store/storetest"
)

// fakeClock is a pinned clock for Memory stores.
type fakeClock struct {
	pinnedClock // its miniredis may be nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	if c.m != nil {
		c.m.SetTime(c.now)
	}
}

func newMemory(t testing.TB, clock *fakeClock, opts MemoryOptions) *memory {
	t.Helper()
	opts.Clock = clock.Now
	m, err := openMemory(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMemoryConformance(t *testing.T) {
	t.Parallel() // a pinned clock: nothing here depends on the machine's speed
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
		clock := &fakeClock{pinnedClock{now: epoch}}
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
			clock := &fakeClock{pinnedClock{m: mini, now: epoch}}
			_ = pinned
			redisStore := newStore(t, newClient(t, mini.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
			memory := newMemory(t, clock, MemoryOptions{})
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
						peekMatches(t, redisStore, memory, keys[peeks.IntN(2)], 1+peeks.IntN(most), set)
					}
					want, err := redisStore.Allow(context.Background(), key, cost, set)
					if err != nil {
						t.Fatal(err)
					}
					got, err := memory.Allow(context.Background(), key, cost, set)
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
func peekMatches(t *testing.T, redisStore *Redis, memory *memory, key string, cost int, set *ratelimit.Limits) {
	t.Helper()
	want, err := redisStore.Peek(context.Background(), key, cost, set)
	if err != nil {
		t.Fatalf("Redis: Peek: %v", err)
	}
	got, err := memory.Peek(context.Background(), key, cost, set)
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
			clock := &fakeClock{pinnedClock{m: mini, now: epoch}}
			redisStore := newStore(t, newClient(t, mini.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
			memory := newMemory(t, clock, MemoryOptions{})
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
					peekMatches(t, redisStore, memory, "k", 1+peeks.IntN(capacity(l)), set)
				}
				want, err := redisStore.Allow(ctx, "k", cost, set)
				if err != nil {
					t.Fatal(err)
				}
				got, err := memory.Allow(ctx, "k", cost, set)
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
	clock := &fakeClock{pinnedClock{now: epoch}}
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
	if n := m.len(); n != 1 {
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
			m := newMemory(t, &fakeClock{pinnedClock{now: epoch}}, MemoryOptions{})
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
	clock := &fakeClock{pinnedClock{now: epoch}}
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
		if n := m.len(); n > maxKeys {
			t.Fatalf("after %d keys the store holds %d, want at most %d", i+1, n, maxKeys)
		}
	}
}

// TestMemoryEvictsExpiredFirst fills a store with short-lived keys and one
// long-lived key; once the short ones expire, new keys replace them and
// the long-lived key keeps its count.
func TestMemoryEvictsExpiredFirst(t *testing.T) {
	clock := &fakeClock{pinnedClock{now: epoch}}
	m := newMemory(t, clock, MemoryOptions{MaxKeys: 64})
	ctx := context.Background()
	long := limitsOf(t, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow))
	short := limitsOf(t, ratelimit.Limit{Quota: 1, Window: 10 * time.Millisecond}.Using(ratelimit.FixedWindow))
	m.Allow(ctx, "keep", 1, long)
	for i := 0; m.len() < 64 && i < 10_000; i++ {
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

func TestMemoryOptions(t *testing.T) {
	if _, err := NewMemory(MemoryOptions{MaxKeys: -1}); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("MaxKeys -1: got %v, want ErrInvalid", err)
	}
	// The zero options are every default: the store holds
	// defaultMaxKeys keys, on the machine's clock.
	m, err := openMemory(MemoryOptions{})
	if err != nil {
		t.Fatalf("MemoryOptions{}: %v", err)
	}
	if got := m.maxKeys(); got < defaultMaxKeys-len(m.shards) || got > defaultMaxKeys {
		t.Errorf("MemoryOptions{}: holds up to %d keys, want about %d", got, defaultMaxKeys)
	}
	if now := m.now(); now < time.Now().Add(-time.Minute).UnixMicro() || now > time.Now().Add(time.Minute).UnixMicro() {
		t.Errorf("MemoryOptions{}: the store's time is %v, want the machine's", time.UnixMicro(now))
	}
}

// algorithmNamed returns the algorithm whose String is name.
func algorithmNamed(t testing.TB, name string) ratelimit.Algorithm {
	t.Helper()
	for a := range 4 {
		if ratelimit.Algorithm(a).String() == name {
			return ratelimit.Algorithm(a)
		}
	}
	t.Fatalf("no algorithm is named %q", name)
	return 0
}

// TestMemoryTakeIsTheSteps holds each algorithm's take, the one-limit
// path, to the steps the multi-limit path takes on the same state: check,
// then commit when the cost fits or settle when not, then effective. The
// answers and the states must be the same, through random gaps and
// costs, on a state shared by two limits whose keys would share it too.
func TestMemoryTakeIsTheSteps(t *testing.T) {
	t.Parallel()
	windows := []time.Duration{time.Millisecond, 20 * time.Millisecond, time.Second, time.Minute}
	for _, name := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(11, uint64(len(name))))
			for round := range traffic(200) {
				l := ratelimit.Limit{Algorithm: algorithmNamed(t, name), Quota: 1 + rng.IntN(20), Window: windows[rng.IntN(len(windows))]}
				if l.Algorithm == ratelimit.SlidingWindow && rng.IntN(2) == 0 {
					l.Precision = l.Window / 2
				}
				other := l // shares the state: another quota, or a token bucket's burst
				if other.Algorithm == ratelimit.TokenBucket {
					l.Burst, other.Burst = 1+rng.IntN(20), 1+rng.IntN(20)
				} else {
					other.Quota = 1 + rng.IntN(20)
				}
				cs := []*compiled{&limitset.Compile(limitsOf(t, l)).Limits[0], &limitset.Compile(limitsOf(t, other)).Limits[0]}
				if cs[0].Suffix != cs[1].Suffix {
					t.Fatalf("%v and %v: suffixes %q and %q, want one state", l, other, cs[0].Suffix, cs[1].Suffix)
				}
				var fused, steps state
				fused.reset(cs[0])
				steps.reset(cs[0])
				now := epoch.UnixMicro()
				for i := range 60 {
					c := cs[rng.IntN(2)]
					switch rng.IntN(4) {
					case 0: // the same µs
					case 1:
						now += 1 + rng.Int64N(c.Window/c.Quota+1)
					case 2:
						now += 1 + rng.Int64N(c.Window)
					default:
						now += 1 + rng.Int64N(3*c.Window)
					}
					cost := 1 + rng.Int64N(c.Capacity)
					var got, want [5]int64 // ok, remaining, reset, retry, window
					ok, remaining, reset, retry, window := fused.take(c, now, cost)
					got = [5]int64{b2i(ok), remaining, reset, retry, window}
					a := steps.of(c)
					ok, remaining, retry = a.check(c, now, cost)
					if ok {
						reset = a.commit(c, now, cost)
						remaining -= cost
					} else {
						reset = a.settle(c, now)
					}
					want = [5]int64{b2i(ok), remaining, reset, retry, a.effective(c, now)}
					if got != want {
						t.Fatalf("round %d, step %d, %v, cost %d: got [ok remaining reset retry window] %v, want %v", round, i, c.Suffix, cost, got, want)
					}
					if !reflect.DeepEqual(fused, steps) {
						t.Fatalf("round %d, step %d, %v, cost %d: got state %+v, want %+v", round, i, c.Suffix, cost, fused, steps)
					}
				}
			}
		})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestMemoryKeysShareAHash puts keys of one hash in a shard, as 64-bit
// hashes that meet would: each keeps its own state, eviction drops each
// alone, wherever it is in the chain, and the count stays right.
func TestMemoryKeysShareAHash(t *testing.T) {
	t.Parallel()
	var sh memoryShard
	sh.keys = make(map[uint64]*memoryKey)
	const h = 42
	names := []string{"a", "b", "c"}
	states := map[string]*memoryKey{}
	for i, name := range names {
		k := sh.key(h, name, 0, 10)
		k.expires.Store(int64(10 * (i + 1))) // a at 10, b at 20, c at 30
		states[name] = k
	}
	sh.key(7, "d", 0, 10).expires.Store(100)
	for _, name := range names {
		if got := sh.key(h, name, 0, 10); got != states[name] {
			t.Fatalf("key %q: got another state than the first time", name)
		}
	}
	if sh.n != 4 || len(sh.keys) != 2 {
		t.Fatalf("got %d keys under %d hashes, want 4 under 2", sh.n, len(sh.keys))
	}
	// At 20, a and b have expired: eviction drops them, in the chain's
	// middle and end, and keeps c and d.
	sh.evict(20)
	for name, want := range map[string]bool{"a": false, "b": false, "c": true} {
		if got := sh.find(h, name) != nil; got != want {
			t.Errorf("after evicting at 20: key %q held %v, want %v", name, got, want)
		}
	}
	if sh.find(7, "d") == nil || sh.find(7, "a") != nil {
		t.Errorf("after evicting at 20: got the wrong keys under another hash")
	}
	if sh.n != 2 {
		t.Errorf("after evicting at 20: got %d keys, want 2", sh.n)
	}
	// Nothing has expired at 25: the soonest, c, goes.
	sh.evict(25)
	if sh.find(h, "c") != nil || sh.find(7, "d") == nil || sh.n != 1 || len(sh.keys) != 1 {
		t.Errorf("after evicting at 25: got %d keys, c held %v, want d alone", sh.n, sh.find(h, "c") != nil)
	}
}

// TestMemoryHashFindsTheKey checks the hash that picks a key's shard finds
// it there: each decided key is held once, in the shard of its hash, and
// a later decision and a lookup find the same state.
func TestMemoryHashFindsTheKey(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{pinnedClock{now: epoch}}
	m := newMemory(t, clock, MemoryOptions{MaxKeys: 1 << 16})
	l := limitsOf(t, ratelimit.PerMinute(10))
	ctx := context.Background()
	for i := range 5000 {
		key := fmt.Sprint("key-", i)
		if _, err := m.Allow(ctx, key, 1, l); err != nil {
			t.Fatal(err)
		}
		k := m.lookup(key)
		if k == nil || k.name != key {
			t.Fatalf("key %q: lookup found no state after a decision", key)
		}
		if got := m.key(key, m.now()); got != k {
			t.Fatalf("key %q: a decision found another state than the lookup", key)
		}
		h := m.hash(key)
		for j := range m.shards {
			sh := &m.shards[j]
			if got := sh.find(h, key) != nil; got != (sh == m.shard(h)) {
				t.Fatalf("key %q: held in shard %d: %v, want only in its hash's shard", key, j, got)
			}
		}
	}
	if n := m.len(); n != 5000 {
		t.Errorf("got %d keys, want 5000", n)
	}
}
