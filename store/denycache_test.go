package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// pinDenyCache makes s's deny cache read the pinned clock.
func pinDenyCache(s *Redis, clock *pinnedClock) {
	s.denied.now = func() int64 { return clock.Now().UnixMicro() }
}

// TestDenyCacheKeepsVerdicts replays random traffic through two Redis
// stores on twin miniredis servers with one pinned clock, one with the
// deny cache and one without: every verdict must be the same, and the
// cached RetryAfter within the 1ms of Redis's expiry resolution.
func TestDenyCacheKeepsVerdicts(t *testing.T) {
	plainM, plainClock := newMiniredis(t)
	cachedM, cachedClock := newMiniredis(t)
	plain := newStore(t, newClient(t, plainM.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
	cached := newStore(t, newClient(t, cachedM.Addr()), RedisOptions{})
	pinDenyCache(cached, cachedClock)
	hook := &countingHook{}
	cached.client.(interface{ AddHook(redis.Hook) }).AddHook(hook)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	windows := []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second}
	local, rounds := 0, 12
	if os.Getenv(redistest.FaultsEnv) == "1" {
		rounds = 30 // the long run
	}
	for round := range rounds {
		var limits []ratelimit.Limit
		for n := 1 + rng.IntN(3); len(limits) < n; {
			l := randomLimit(rng, windows)
			l.Quota = 1 + rng.IntN(5)
			if _, err := ratelimit.NewLimits(append(limits, l)...); err == nil {
				limits = append(limits, l)
			}
		}
		// One set for the round: the deny cache knows a request's limits
		// by their set, as a Limiter reuses its own.
		set := limitsOf(t, limits...)
		key := fmt.Sprintf("round-%d", round)
		for range 200 {
			if rng.IntN(3) == 0 {
				d := time.Duration(rng.IntN(300)) * time.Millisecond
				plainClock.Advance(d)
				cachedClock.Advance(d)
			}
			cost := 1
			if rng.IntN(4) == 0 {
				cost = 2
			}
			if cost > capacity(limits[0]) || (len(limits) > 1 && cost > min(capacity(limits[1]), capacity(limits[len(limits)-1]))) {
				cost = 1
			}
			want, err := plain.Allow(ctx, key, cost, set)
			if err != nil {
				t.Fatal(err)
			}
			before := hook.n
			got, err := cached.Allow(ctx, key, cost, set)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed != want.Allowed {
				t.Fatalf("round %d, %v cost %d: cached verdict %v, Redis's %v", round, limits, cost, got.Allowed, want.Allowed)
			}
			if d := got.RetryAfter - want.RetryAfter; d < -time.Millisecond || d > time.Millisecond {
				t.Fatalf("round %d: cached RetryAfter %v, Redis's %v", round, got.RetryAfter, want.RetryAfter)
			}
			if hook.n == before {
				local++
			}
		}
	}
	if local == 0 {
		t.Error("no decision came from the cache")
	}
	t.Logf("%d decisions answered from the deny cache", local)
}

// TestDenyCacheSavesRedis checks that repeated denials stay in process,
// end when they should, and that a Reset forgets them.
func TestDenyCacheSavesRedis(t *testing.T) {
	s, clock, hook := cachedStore(t)
	ctx := context.Background()
	l := limitsOf(t, ratelimit.Limit{Quota: 3, Window: 10 * time.Second}.Using(ratelimit.FixedWindow))
	for range 3 {
		s.Allow(ctx, "k", 1, l)
	}
	first, _ := s.Allow(ctx, "k", 1, l)
	if first.Allowed {
		t.Fatal("fourth request allowed")
	}
	calls := hook.n
	clock.Advance(4 * time.Second)
	for range 100 {
		d, err := s.Allow(ctx, "k", 1, l)
		if err != nil || d.Allowed {
			t.Fatalf("a cached denial: got %+v, %v", d, err)
		}
		if got, want := d.RetryAfter, first.RetryAfter-4*time.Second; got != want {
			t.Fatalf("cached RetryAfter %v, want %v", got, want)
		}
	}
	if hook.n != calls {
		t.Errorf("100 repeated denials sent %d commands to Redis, want 0", hook.n-calls)
	}
	if err := s.Reset(ctx, "k", l); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Allow(ctx, "k", 1, l); !d.Allowed || hook.n == calls {
		t.Errorf("after Reset: got %+v from the cache, want Redis to allow", d)
	}
	for range 3 {
		s.Allow(ctx, "k", 1, l)
	}
	calls = hook.n
	clock.Advance(10 * time.Second)
	if d, _ := s.Allow(ctx, "k", 1, l); !d.Allowed || hook.n == calls {
		t.Errorf("after RetryAfter: got %+v, want Redis to allow", d)
	}
}

// cachedStore returns a Redis store on a miniredis pinned at epoch, with
// its deny cache on the same clock, and a hook counting the commands the
// store sends.
func cachedStore(t *testing.T) (*Redis, *pinnedClock, *countingHook) {
	m, clock := newMiniredis(t)
	client := newClient(t, m.Addr())
	hook := &countingHook{}
	client.AddHook(hook)
	s := newStore(t, client, RedisOptions{})
	pinDenyCache(s, clock)
	return s, clock, hook
}

func TestDenyCacheIsBounded(t *testing.T) {
	m, clock := newMiniredis(t)
	s := newStore(t, newClient(t, m.Addr()), RedisOptions{DenyCacheSize: 64})
	pinDenyCache(s, clock)
	ctx := context.Background()
	l := limitsOf(t, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow))
	for i := range 2000 {
		key := fmt.Sprintf("k%d", i)
		s.Allow(ctx, key, 1, l)
		s.Allow(ctx, key, 1, l)
	}
	n := 0
	for i := range s.denied.shards {
		n += int(s.denied.shards[i].keys.Load())
	}
	if n > 64 {
		t.Errorf("the deny cache holds %d entries, want at most 64", n)
	}
	// A negative size turns the cache off: every denial asks Redis.
	off := newStore(t, newClient(t, m.Addr()), RedisOptions{DenyCacheSize: -1})
	if off.denied != nil {
		t.Error("DenyCacheSize -1: the deny cache is on")
	}
	hook := &countingHook{}
	off.client.(interface{ AddHook(redis.Hook) }).AddHook(hook)
	for range 3 {
		if d, err := off.Allow(ctx, "k0", 1, l); err != nil || d.Allowed {
			t.Fatalf("DenyCacheSize -1, a spent key: got %+v, %v; want a denial", d, err)
		}
	}
	if hook.n < 3 {
		t.Errorf("DenyCacheSize -1: 3 denials sent %d commands to Redis, want one each", hook.n)
	}
}

// pinnedDenyCache returns a deny cache whose clock reads *now, from 1s,
// and a request for key "k" under a sliding log of 1 an hour.
func pinnedDenyCache(t *testing.T) (*denyCache, *int64, *request) {
	c := newDenyCache(64)
	now := int64(1_000_000)
	c.now = func() int64 { return now }
	l := ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.SlidingLog)
	return c, &now, &request{key: "k", cost: 1, limits: []ratelimit.Limit{l}, set: limitset.Compile(limitsOf(t, l))}
}

// TestDenyCacheReadBeforePut is a get that read the clock just before a
// concurrent put stored its denial: it must not report times later than
// the ones Redis gave.
func TestDenyCacheReadBeforePut(t *testing.T) {
	c, now, r := pinnedDenyCache(t)
	l := r.limits[0]
	denied := ratelimit.MakeDecision(ratelimit.Result{Limit: l, Remaining: 0, ResetAfter: time.Hour, RetryAfter: time.Hour})
	c.put(r, denied, c.epoch("k"))
	*now -= 300 // the get's reading of the clock, taken before the put's
	d, ok := c.get(r)
	if !ok {
		t.Fatal("the denial is not cached")
	}
	if got, want := d.Results()[0], denied.Results()[0]; got.ResetAfter != want.ResetAfter || got.RetryAfter != want.RetryAfter {
		t.Errorf("got ResetAfter %v, RetryAfter %v; want %v, %v", got.ResetAfter, got.RetryAfter, want.ResetAfter, want.RetryAfter)
	}
}

// TestDenyCacheWindowFromTheSend is a denial whose answer took 500µs to
// come back: Redis may have decided as the request left, so the effective
// window it serves counts from then, and never promises past its end.
func TestDenyCacheWindowFromTheSend(t *testing.T) {
	c, now, r := pinnedDenyCache(t)
	l := r.limits[0]
	denied := ratelimit.MakeDecision(ratelimit.Result{Limit: l, Window: time.Second, ResetAfter: time.Hour, RetryAfter: time.Second})
	epoch := c.epoch("k")
	*now += 500 // the round trip
	c.put(r, denied, epoch)
	for _, step := range []struct {
		after int64
		want  time.Duration
	}{{0, time.Second - 500*time.Microsecond}, {250_000, 750*time.Millisecond - 500*time.Microsecond}} {
		*now += step.after
		d, ok := c.get(r)
		if !ok {
			t.Fatal("the denial is not cached")
		}
		if got := d.Results()[0].Window; got != step.want {
			t.Errorf("%dµs after the answer: Window %v, want %v", *now-1_000_500, got, step.want)
		}
	}
}
