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
	"github.com/ratelimit-go/ratelimit/redistest"
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
	k := redisKey(s, key, l)
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		n, _ := client.Get(ctx, k).Int64()
		return n
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
// late is made in process too.
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
					for {
						select {
						case <-stop:
							return
						default:
						}
						d, err := f.Allow(context.Background(), "k", 1, limits)
						if err != nil {
							t.Errorf("Allow: %v", err)
							return
						}
						if !d.Allowed {
							time.Sleep(time.Millisecond)
							continue
						}
						time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
						u := rng.IntN(most + 1)
						e, err := f.End(context.Background(), "k", u, limits, d)
						if err != nil {
							t.Errorf("End(%d): %v", u, err)
							return
						}
						if e.Fallback {
							local.Add(int64(u))
						}
						sum.Add(int64(u))
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			recovered := f.Health().Recoveries
			srv.Pause()
			time.Sleep(time.Second)
			srv.Resume()
			waitFor(t, "decisions to return to Redis", func() bool {
				h := f.Health()
				return h.Decisions == "redis" && h.Recoveries > recovered && !f.reconciling.Load()
			})
			time.Sleep(200 * time.Millisecond)
			close(stop)
			wg.Wait()
			waitFor(t, "the backlog to reach Redis", func() bool { return !f.reconciling.Load() })
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
			if got < want || got > want+goroutines*most {
				t.Fatalf("Redis holds %d, want the %d charged, and at most %d more", got, want, goroutines*most)
			}
		})
	}
}
