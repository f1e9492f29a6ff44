package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// debtLimits are a limit of 2,000 charged from usage for each algorithm
// that can carry a debt: windows of an hour, a token bucket that refills
// a token a day, a calendar month.
var debtLimits = []ratelimit.Limit{
	{Algorithm: ratelimit.FixedWindow, Quota: 2000, Window: time.Hour, Usage: true},
	{Quota: 2000, Window: time.Hour, Precision: 6 * time.Minute, Usage: true},
	{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: 24 * time.Hour, Burst: 2000, Usage: true},
	{Algorithm: ratelimit.Monthly, Quota: 2000, Zone: "Europe/Paris", Usage: true},
}

// spent returns the units Redis holds as taken from key under l, in a
// token bucket's units for a token bucket (a token is compileLimit(l).Unit
// of them), and in units otherwise.
func spent(t *testing.T, client *redis.Client, s *Redis, key string, l ratelimit.Limit) int64 {
	t.Helper()
	ctx := context.Background()
	k := limitKey(s, key, l)
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		n, _ := client.Get(ctx, k).Int64()
		return n
	case ratelimit.SlidingLog:
		return client.ZCard(ctx, k).Val()
	case ratelimit.SlidingWindow:
		var n int64
		for _, v := range client.HVals(ctx, k).Val() {
			c, _ := strconv.ParseInt(v, 10, 64)
			n += c
		}
		return n
	case ratelimit.Monthly:
		var end, n int64
		if v, err := client.Get(ctx, k).Result(); err == nil {
			if _, err := fmt.Sscan(v, &end, &n); err != nil {
				t.Fatalf("the calendar's key holds %q: %v", v, err)
			}
		}
		return n
	}
	c := compileLimit(l)
	var level, last int64
	if v, err := client.Get(ctx, k).Result(); err == nil {
		if _, err := fmt.Sscan(v, &level, &last); err != nil {
			t.Fatalf("the bucket holds %q: %v", v, err)
		}
	} else {
		level = c.Units
	}
	return c.Units - level
}

// pausedForASecond pauses srv for a second while traffic runs through f,
// and returns once f decides on Redis again, its backlogs charged, and
// 200ms more have passed.
func pausedForASecond(t *testing.T, srv *redistest.Server, f *Fallback) {
	time.Sleep(100 * time.Millisecond)
	recovered := f.Health().Recoveries
	srv.Pause()
	time.Sleep(time.Second)
	srv.Resume()
	waitFor(t, "decisions to return to Redis", func() bool {
		h := f.Health()
		return h.Decisions == "redis" && h.Recoveries > recovered && !f.impl.Reconciling()
	})
	time.Sleep(200 * time.Millisecond)
}

// TestUsageChargesAddUp sends random concurrent traffic through a real
// server: 8 goroutines, each request decided, then, if admitted, ended
// with a random usage of 0 to 40 units, past the quota of 2,000 into a
// debt. What Redis holds must be the sum of the usage charged, to the
// unit, for each algorithm that can carry a debt (a token bucket, which
// refills, by at most what it refilled meanwhile); and nothing else was
// taken from the limit charged from usage by the admissions.
func TestUsageChargesAddUp(t *testing.T) {
	srv := redistest.Shared(t)
	for _, l := range debtLimits {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			t.Parallel()
			client := newClient(t, srv.Addr)
			s := newStore(t, client, RedisOptions{Prefix: uniquePrefix()})
			limits := limitsOf(t, l, ratelimit.PerMinute(1_000_000))
			start := time.Now()
			var sum, ended, denied atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for range 60 {
						d, err := s.Allow(context.Background(), "k", 1, limits)
						if err != nil {
							t.Errorf("Allow: %v", err)
							return
						}
						if !d.Allowed {
							denied.Add(1)
							continue
						}
						u := rng.IntN(41)
						if _, err := s.End(context.Background(), "k", u, limits, d); err != nil {
							t.Errorf("End(%d): %v", u, err)
							return
						}
						sum.Add(int64(u))
						ended.Add(1)
					}
				})
			}
			wg.Wait()
			got := spent(t, client, s, "k", l)
			want := sum.Load()
			t.Logf("%v: %d requests ended, %d denied; %d units charged, Redis holds %.3f", l.Algorithm, ended.Load(), denied.Load(), want, float64(got)/float64(compileLimit(l).Unit|1))
			if l.Algorithm == ratelimit.TokenBucket {
				c := compileLimit(l)
				refilled := int64(time.Since(start)/time.Microsecond) * c.Rate
				if got > want*c.Unit || got < want*c.Unit-refilled {
					t.Fatalf("the bucket is down %d units, want the %d charged (%d units a token) less at most %d refilled", got, want, c.Unit, refilled)
				}
			} else if got != want {
				t.Fatalf("Redis holds %d, want the %d units charged", got, want)
			}
			if want <= int64(l.Quota) || denied.Load() == 0 {
				t.Fatalf("charged %d with %d denials: the traffic never went past the quota %d", want, denied.Load(), l.Quota)
			}
		})
	}
}

// TestFaultUsageThroughOutage charges usage through a Fallback while
// Redis hangs (SIGSTOP) for a second under traffic whose requests end
// between 0 and 3ms after they are admitted, so that some are admitted by
// Redis and charged in process, or the other way round. Once decisions
// are back on Redis, it must hold every unit charged (what was charged in
// process is brought to it), and at most one more charge per request
// under way when Redis stopped: a charge Redis made whose answer came too
// late is made in process too. On a loaded machine a timeout after the
// recovery may start another outage: each may add as much.
func TestFaultUsageThroughOutage(t *testing.T) {
	redistest.RequireFaults(t)
	for _, l := range debtLimits {
		// A quota the traffic never spends: a spent one is answered by
		// the deny cache, which would not notice Redis stop.
		l.Quota *= 1000
		if l.Algorithm == ratelimit.TokenBucket { // a token an hour: a burst a day's would not be exact
			l.Quota, l.Window, l.Burst = 1, time.Hour, l.Burst*1000
		}
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			srv := persistent(t)
			f, client := newOutageFallback(t, srv, "u:", 0)
			limits := limitsOf(t, l)
			var sum, local atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			const goroutines, most = 4, 40
			for g := range goroutines {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 11))
					allowUntil(t, stop, f, "k", limits, func(d ratelimit.Decision) bool {
						time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
						u := rng.IntN(most + 1)
						e, err := f.End(context.Background(), "k", u, limits, d)
						if err != nil {
							t.Errorf("End(%d): %v", u, err)
							return false
						}
						if e.Fallback {
							local.Add(int64(u))
						}
						sum.Add(int64(u))
						return true
					})
				})
			}
			pausedForASecond(t, srv, f)
			close(stop)
			wg.Wait()
			// A timeout after the recovery (a loaded machine, the race
			// detector) starts another outage: wait for its backlog too.
			waitFor(t, "the backlog to reach Redis", func() bool {
				h := f.Health()
				return h.Decisions == "redis" && h.Waiting == 0 && !f.impl.Reconciling()
			})
			got, want := spent(t, client, f.redis, "k", l), sum.Load()
			t.Logf("%v: %d units charged, %d of them in process; Redis holds %d; %+v", l.Algorithm, want, local.Load(), got, f.Health())
			if local.Load() == 0 {
				t.Fatalf("no usage was charged in process: the outage did not happen under the traffic")
			}
			unit := int64(1)
			if l.Algorithm == ratelimit.TokenBucket {
				unit = compileLimit(l).Unit
				got = (got + unit - 1) / unit // the refill of a second is under a token
			}
			over := int64(goroutines * most * max(f.Health().Outages, 1)) // per outage, a charge per request under way
			if got < want || got > want+over {
				t.Fatalf("Redis holds %d, want the %d charged, and at most %d more", got, want, over)
			}
		})
	}
}

// TestFaultConcurrentThroughOutage: requests holding slots of a limit of
// 4 in flight through two Fallbacks (Instances 2) while Redis hangs for
// a second. While Redis is down each instance holds at most its share, 2,
// of the slots it decides in process; slots Redis gave are given back
// there, or, for requests that ended during the outage, expire within a
// slot; and once everything has ended Redis holds no slot.
func TestFaultConcurrentThroughOutage(t *testing.T) {
	redistest.RequireFaults(t)
	srv := persistent(t)
	const slots, slot = 4, time.Second
	f1, client := newOutageFallback(t, srv, "c:", 2)
	f2, _ := newOutageFallback(t, srv, "c:", 2)
	limits := limitsOf(t, ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: slots, Window: slot})
	var most [2]atomic.Int64 // the most slots each held in process at once
	var held [2]atomic.Int64
	var local, onRedis atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, f := range []*Fallback{f1, f2} {
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
				allowUntil(t, stop, f, "k", limits, func(d ratelimit.Decision) bool {
					if d.Fallback {
						local.Add(1)
						n := held[i].Add(1)
						for m := most[i].Load(); n > m && !most[i].CompareAndSwap(m, n); m = most[i].Load() {
						}
					} else {
						onRedis.Add(1)
					}
					time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
					if d.Fallback {
						held[i].Add(-1)
					}
					if _, err := f.End(context.Background(), "k", 0, limits, d); err != nil {
						t.Errorf("End: %v", err)
						return false
					}
					return true
				})
			})
		}
	}
	pausedForASecond(t, srv, f1)
	close(stop)
	wg.Wait()
	t.Logf("%d slots taken on Redis, %d in process; in process, at most %d and %d at once", onRedis.Load(), local.Load(), most[0].Load(), most[1].Load())
	if local.Load() == 0 {
		t.Fatal("no slot was taken in process: the outage did not happen under the traffic")
	}
	for i := range most {
		if most[i].Load() > 2 {
			t.Errorf("instance %d held %d slots in process at once, more than its share, 2", i, most[i].Load())
		}
	}
	key := limitKey(f1.redis, "k", limits.All()[0])
	waitFor(t, "the slots on Redis to be given back or to expire", func() bool {
		n, err := client.ZCount(context.Background(), key, "("+strconv.FormatInt(time.Now().UnixMicro(), 10), "+inf").Result()
		return err == nil && n == 0
	})
}

// TestLeasesRenewed renews a slot by hand, as the store's
// renewing goroutine does every third of a slot's life, on a pinned clock: the
// slot outlives its first life, and comes back a slot's life after the last
// renewal; a slot given back is not renewed into life again.
func TestLeasesRenewed(t *testing.T) {
	// Slots of 30s: the store's own renewals, every 10s of real time, never
	// come while the test runs on its pinned clock.
	l := ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 1, Window: 30 * time.Second}
	for _, tt := range []struct {
		name string
		make func(t *testing.T) (ratelimit.Store, func(time.Duration), func())
	}{
		{"memory", func(t *testing.T) (ratelimit.Store, func(time.Duration), func()) {
			clock := testkit.NewClock(epoch, nil)
			m := newMemory(t, clock, MemoryOptions{})
			return m, clock.Advance, m.RenewSlots
		}},
		{"redis", func(t *testing.T) (ratelimit.Store, func(time.Duration), func()) {
			mr, clock := newMiniredis(t)
			s := newStore(t, newClient(t, mr.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
			return s, clock.Advance, func() { s.renewSlots(s.slots.Held()) }
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, advance, renew := tt.make(t)
			limits := limitsOf(t, l)
			ctx := context.Background()
			d, err := s.Allow(ctx, "k", 1, limits)
			if err != nil || !d.Allowed {
				t.Fatalf("Allow: %+v, %v", d, err)
			}
			for range 3 {
				advance(20 * time.Second)
				renew()
				if d, _ := s.Allow(ctx, "k", 1, limits); d.Allowed {
					t.Fatalf("a renewed slot was taken by another request")
				}
			}
			advance(30*time.Second - time.Microsecond)
			if d, _ := s.Allow(ctx, "k", 1, limits); d.Allowed {
				t.Fatalf("1µs before the last renewal's slot ends: allowed")
			}
			advance(time.Microsecond)
			e, err := s.Allow(ctx, "k", 1, limits)
			if err != nil || !e.Allowed {
				t.Fatalf("a slot's life after the last renewal: got %+v, %v; want the slot back", e, err)
			}
			if _, err := s.End(ctx, "k", 0, limits, e); err != nil {
				t.Fatal(err)
			}
			renew() // e's slot was dropped: nothing to renew
			if d, _ := s.Allow(ctx, "k", 1, limits); !d.Allowed {
				t.Fatalf("after End: the slot is still held")
			}
		})
	}
}
