package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// admission is units admitted at a time, in µs.
type admission struct{ at, units int64 }

// checkAdmissions fails t when admissions break limit l's definition:
// more than the quota in a fixed window (windows opening at the times
// starts gives), in a sliding window's slots (aligned on the clock), or,
// for a token bucket, more in a span of time than the burst and the
// refill of that span.
func checkAdmissions(t *testing.T, l ratelimit.Limit, adm []admission, starts []int64) {
	t.Helper()
	sort.Slice(adm, func(i, j int) bool { return adm[i].at < adm[j].at })
	grouped := adm[:0:0] // one entry per instant
	for _, a := range adm {
		if n := len(grouped); n > 0 && grouped[n-1].at == a.at {
			grouped[n-1].units += a.units
			continue
		}
		grouped = append(grouped, a)
	}
	adm = grouped
	c := compileLimit(l)
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		for _, s := range starts {
			var n int64
			for _, a := range adm {
				if a.at >= s && a.at < s+c.Window {
					n += a.units
				}
			}
			if n > c.Quota {
				t.Errorf("%v: %d admitted in the window opened at %dµs", l, n, s)
			}
		}
	case ratelimit.SlidingWindow:
		per := map[int64]int64{}
		for _, a := range adm {
			per[a.at/c.Width] += a.units
		}
		for slot := range per {
			for last := slot; last < slot+c.Slots; last++ {
				var n int64
				for s := last - c.Slots + 1; s <= last; s++ {
					n += per[s]
				}
				if n > c.Quota {
					t.Fatalf("%v: %d admitted in the slots %d to %d", l, n, last-c.Slots+1, last)
				}
			}
		}
	case ratelimit.TokenBucket:
		burst := float64(c.Capacity)
		rate := float64(l.Quota) / float64(l.Window/time.Microsecond) // tokens a µs
		for i := range adm {
			var n int64
			for j := i; j < len(adm); j++ {
				n += adm[j].units
				span := float64(adm[j].at - adm[i].at)
				if float64(n) > burst+rate*span+1e-6 {
					t.Fatalf("%v: %d admitted from %dµs to %dµs, more than the burst %v and the refill of %vµs", l, n, adm[i].at, adm[j].at, burst, span)
				}
			}
		}
	}
}

// TestLeasedNeverAboveTheLimit runs random traffic of random costs from
// four instances (four stores, each with its own client and slices) on one
// miniredis whose clock, pinned, the slices follow too, across many
// window ends, and checks every admission against the limit's
// definition: leased units are spent in process, and never more than the
// limit allows.
func TestLeasedNeverAboveTheLimit(t *testing.T) {
	t.Parallel()
	for _, l := range []ratelimit.Limit{
		{Quota: 500, Window: time.Second, Leased: true, Algorithm: ratelimit.FixedWindow},
		{Quota: 500, Window: time.Second, Leased: true, Algorithm: ratelimit.SlidingWindow, Precision: 100 * time.Millisecond},
		{Quota: 500, Window: time.Second, Leased: true, Algorithm: ratelimit.TokenBucket},
		{Quota: 50, Window: time.Second, Burst: 200, Leased: true, Algorithm: ratelimit.TokenBucket},
	} {
		t.Run(fmt.Sprintf("%v", l), func(t *testing.T) {
			m, clk, instances := leasedInstances(t, 4)
			limits := limitsOf(t, l)
			rng := rand.New(rand.NewPCG(1, uint64(l.Algorithm)))
			ctx := context.Background()
			var adm []admission
			var starts []int64
			key := "hot"
			stateKey := redisKey(defaultPrefix, key, compileLimit(l).Suffix)
			leasedUnits, allowed, denied := 0, 0, 0
			ms := func(max time.Duration) time.Duration {
				return time.Duration(rng.IntN(int(max/time.Millisecond)+1)) * time.Millisecond
			}
			regime, rounds := 0, 1500
			if os.Getenv(redistest.FaultsEnv) == "1" {
				rounds = 20_000 // the long run
			}
			for round := range rounds {
				// Traffic comes light, heavy, or heavy after a pause that
				// leaves slices out while the limit refills or its window
				// ends.
				if round%100 == 0 {
					if regime = rng.IntN(3); regime == 2 {
						clk.Advance(ms(l.Window))
					}
				}
				switch {
				case regime == 0 && rng.IntN(5) == 0:
					clk.Advance(ms(l.Window / 8))
				case regime > 0 && rng.IntN(20) == 0:
					clk.Advance(ms(l.Window / 50))
				}
				existed := m.Exists(stateKey)
				cost := 1 + rng.IntN(3)
				d, err := instances[rng.IntN(len(instances))].Allow(ctx, key, cost, limits)
				if err != nil {
					t.Fatal(err)
				}
				now := clk.Now().Sub(epoch).Microseconds()
				if !existed && m.Exists(stateKey) {
					starts = append(starts, now)
				}
				if d.Allowed {
					allowed++
					adm = append(adm, admission{at: now, units: int64(cost)})
				} else {
					denied++
				}
			}
			for _, s := range instances {
				for i := range s.leased.shards {
					for _, k := range s.leased.shards[i].keys {
						for _, q := range k.limits {
							leasedUnits += int(q.units)
						}
					}
				}
			}
			t.Logf("%d allowed, %d denied, %d fixed windows, %d units leased and unspent at the end", allowed, denied, len(starts), leasedUnits)
			if allowed == 0 || denied == 0 {
				t.Fatalf("%d allowed, %d denied: the traffic did not reach the limit", allowed, denied)
			}
			checkAdmissions(t, l, adm, starts)
		})
	}
}

// leasedInstances returns n stores, each with its own client, on one
// miniredis whose pinned clock their slices follow.
func leasedInstances(t *testing.T, n int) (*miniredis.Miniredis, *pinnedClock, []*Redis) {
	m, clk := newMiniredis(t)
	var instances []*Redis
	for range n {
		s := newStore(t, newClient(t, m.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
		s.leased.clock = func() int64 { return clk.Now().Sub(epoch).Nanoseconds() }
		instances = append(instances, s)
	}
	return m, clk, instances
}

// TestLeasedWindowEnds: a slice taken just before its units would count
// elsewhere ends there. Instance a holds units leased before a window
// ends (a fixed window's), before their slot ends (a sliding window's),
// or while a token bucket was full; then b spends all the limit allows,
// and a spends what it holds. Without the bounds on a slice's life, a's
// units would come on top of b's.
func TestLeasedWindowEnds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		l     ratelimit.Limit
		steps []time.Duration // a decides at each, then b spends all it can at the last; a spends all it can at the last
	}{
		{ratelimit.Limit{Quota: 500, Window: time.Second, Algorithm: ratelimit.FixedWindow}, []time.Duration{0, 950 * time.Millisecond, 1001 * time.Millisecond}},
		{ratelimit.Limit{Quota: 500, Window: time.Second, Algorithm: ratelimit.SlidingWindow, Precision: 100 * time.Millisecond}, []time.Duration{50 * time.Millisecond, 120 * time.Millisecond, 1050 * time.Millisecond}},
		{ratelimit.Limit{Quota: 500, Window: time.Second, Algorithm: ratelimit.TokenBucket}, []time.Duration{0, 99 * time.Millisecond}},
	} {
		t.Run(tt.l.Algorithm.String(), func(t *testing.T) {
			tt.l.Leased = true
			_, clk, inst := leasedInstances(t, 2)
			a, b := inst[0], inst[1]
			limits := limitsOf(t, tt.l)
			ctx := context.Background()
			var adm []admission
			var starts []int64
			allow := func(s *Redis) bool {
				d, err := s.Allow(ctx, "k", 1, limits)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					adm = append(adm, admission{at: clk.Now().Sub(epoch).Microseconds(), units: 1})
				}
				return d.Allowed
			}
			at := func(d time.Duration) { clk.Advance(epoch.Add(d).Sub(clk.Now())) }
			for i, step := range tt.steps {
				at(step)
				starts = append(starts, clk.Now().Sub(epoch).Microseconds())
				if i < len(tt.steps)-1 {
					allow(a)
					continue
				}
				bs := 0
				for allow(b) {
					bs++
				}
				as := 0
				for allow(a) {
					as++
				}
				t.Logf("at %v: b spent %d, then a %d", step, bs, as)
			}
			checkAdmissions(t, tt.l, adm, starts[len(starts)-1:])
		})
	}
}

// TestLeasedOnRedisServer: four instances (stores with clients of their
// own), four goroutines each, random costs, one redis-server, until the
// limit is spent; a window of an hour, so that the run is one window.
// Every unit admitted was leased or decided on Redis: the instances admit
// no more than the limit, and Redis counts what they admitted plus what
// they hold unspent. Then a Reset while slices are out: after it, the
// instances admit at most the limit and what they held before it. Under
// RATELIMIT_FAULTS, Redis also hangs (SIGSTOP) while slices are out: the
// instances go on spending them, then fail, and the limit holds.
func TestLeasedOnRedisServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	for _, l := range []ratelimit.Limit{
		{Quota: 20_000, Window: time.Hour, Algorithm: ratelimit.FixedWindow},
		{Quota: 20_000, Window: time.Hour, Algorithm: ratelimit.SlidingWindow, Precision: time.Minute},
		{Quota: 20_000, Window: time.Hour, Algorithm: ratelimit.TokenBucket},
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			l.Leased = true
			limits := limitsOf(t, l)
			prefix := fmt.Sprintf("leased%d:", time.Now().UnixNano())
			var inst []*Redis
			for range 4 {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
				t.Cleanup(func() { c.Close() })
				inst = append(inst, newStore(t, c, RedisOptions{Prefix: prefix}))
			}
			ctx := context.Background()
			used := func(key string) int64 {
				d, err := inst[0].Peek(ctx, key, 1, limits)
				if err != nil {
					t.Fatal(err)
				}
				return int64(l.Quota - d.Results()[0].Remaining)
			}
			// run sends requests of key from 16 goroutines until stop
			// says so, and returns the units admitted, and the calls that
			// failed.
			var pace time.Duration // between a goroutine's requests
			run := func(key string, stop func(admitted int64) bool) (admitted, failed int64) {
				var a, f atomic.Int64
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), 7))
						for !stop(a.Load()) {
							time.Sleep(pace)
							cost := 1 + rng.IntN(3)
							cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
							d, err := inst[g%len(inst)].Allow(cctx, key, cost, limits)
							cancel()
							switch {
							case err != nil:
								if f.Add(1) == 1 {
									t.Logf("first error: %v", err)
								}
							case d.Allowed:
								a.Add(int64(cost))
							}
						}
					})
				}
				wg.Wait()
				return a.Load(), f.Load()
			}
			start := time.Now()
			refill := func() int64 { // what a token bucket gained since start, at most
				if l.Algorithm != ratelimit.TokenBucket {
					return 0
				}
				return int64(float64(l.Quota)*time.Since(start).Seconds()/l.Window.Seconds()) + 1
			}
			var denied atomic.Int64
			untilSpent := func(int64) bool { return denied.Load() > 0 }
			spentOnce := func(key string) {
				// A goroutine stops the run once Redis has had nothing
				// left for longer than a slice lasts: the instances have
				// spent their slices, or the slices have ended.
				go func() {
					var since time.Time
					for {
						if d, err := inst[0].Peek(ctx, key, 3, limits); err == nil && !d.Allowed {
							if since.IsZero() {
								since = time.Now()
							}
							if time.Since(since) > sliceLife+50*time.Millisecond {
								denied.Add(1)
								return
							}
						} else {
							since = time.Time{}
						}
						time.Sleep(time.Millisecond)
					}
				}()
			}

			// The limit spent by all.
			denied.Store(0)
			spentOnce("a")
			admitted, failed := run("a", untilSpent)
			counted := used("a")
			t.Logf("spent: %d admitted, Redis counts %d (%d leased and unspent), %d calls failed", admitted, counted, counted-admitted, failed)
			if admitted > int64(l.Quota)+refill() || admitted > counted+refill() {
				t.Errorf("%d admitted of %d (Redis counts %d), %d calls failed", admitted, l.Quota, counted, failed)
			}

			// A Reset while slices are out.
			half := int64(l.Quota / 2)
			before, _ := run("b", func(a int64) bool { return a >= half })
			countedBefore := used("b")
			if err := inst[0].Reset(ctx, "b", limits); err != nil {
				t.Fatal(err)
			}
			denied.Store(0)
			spentOnce("b")
			after, _ := run("b", untilSpent)
			t.Logf("reset: %d admitted before it, Redis counted %d; %d after it", before, countedBefore, after)
			if out := countedBefore - before; after > int64(l.Quota)+out+refill() {
				t.Errorf("after the Reset, %d admitted, more than the limit %d and the %d leased before it", after, l.Quota, out)
			}

			if os.Getenv(redistest.FaultsEnv) != "1" {
				return
			}
			// Redis hung while slices are out, under paced traffic.
			var pausedAt, resumedAt atomic.Int64
			var fault sync.WaitGroup
			denied.Store(0)
			spentOnce("c")
			var progress atomic.Int64
			fault.Go(func() {
				time.Sleep(200 * time.Millisecond)
				pausedAt.Store(progress.Load())
				srv.Pause()
				time.Sleep(500 * time.Millisecond)
				resumedAt.Store(progress.Load())
				srv.Resume()
			})
			pace = time.Millisecond
			admitted, failed = run("c", func(a int64) bool {
				progress.Store(a)
				return denied.Load() > 0
			})
			pace = 0
			fault.Wait()
			counted = used("c")
			t.Logf("Redis hung 500ms: %d admitted (about %d while it hung), Redis counts %d, %d calls failed", admitted, resumedAt.Load()-pausedAt.Load(), counted, failed)
			if admitted > int64(l.Quota)+refill() || admitted > counted+refill() {
				t.Errorf("%d admitted of %d (Redis counts %d)", admitted, l.Quota, counted)
			}
		})
	}
}

// TestLeasedThroughEveryWrapper: a leased limit spent from two instances
// of each store: Memory (which decides in process anyway), Redis on a
// server, a Fallback around it, and Redis on a 3-master cluster. Each
// admits at most the limit, and, with traffic going on until the slices
// are spent, all of it but what slices lapsed unspent: a slice taken just
// before its slot ends (the sliding window's slots are 6 minutes, aligned
// on the clock) ends before it is spent, at most a slice per instance
// and slot end; and a slice lapses when its instance is slower than its
// life (sliceLife) to spend it, which a loaded machine can make any slice
// do: a call to Redis or a goroutine late by 100ms. Those are measured
// (see mayLapse), not assumed away; on an idle machine they are each
// instance's last slice.
func TestLeasedThroughEveryWrapper(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	cluster := redistest.SharedCluster(t)
	l := ratelimit.Limit{Quota: 5000, Window: time.Hour, Algorithm: ratelimit.SlidingWindow, Leased: true}
	limits := limitsOf(t, l)
	for _, tt := range []struct {
		name string
		make func(t *testing.T, prefix string) ratelimit.Store
	}{
		{"memory", func(t *testing.T, _ string) ratelimit.Store {
			m, err := NewMemory(MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{"redis", func(t *testing.T, prefix string) ratelimit.Store {
			return newStore(t, newClient(t, srv.Addr), RedisOptions{Prefix: prefix})
		}},
		{"fallback", func(t *testing.T, prefix string) ratelimit.Store {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() })
			// A budget long enough for a loaded machine: the test is of
			// slices through the Fallback, on Redis.
			f, err := NewFallback(newStore(t, c, RedisOptions{Prefix: prefix}), FallbackOptions{Instances: 2, Budget: 2 * time.Second, Logger: quietLogger})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{"cluster", func(t *testing.T, prefix string) ratelimit.Store {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
			t.Cleanup(func() { c.Close() })
			return newStore(t, c, RedisOptions{Prefix: prefix})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("wrap%d:", time.Now().UnixNano())
			stores := []ratelimit.Store{tt.make(t, prefix), tt.make(t, prefix)}
			if tt.name == "memory" {
				stores = stores[:1] // an instance's own
			}
			ctx := context.Background()
			var admitted, denials, local atomic.Int64
			var lastAllowed atomic.Int64
			var wg sync.WaitGroup
			var mu sync.Mutex
			takes := make([][]sliceTake, len(stores)) // by instance
			start := time.Now()
			for g := range 8 {
				wg.Go(func() {
					s := stores[g%len(stores)]
					for {
						began := time.Since(start)
						d, err := s.Allow(ctx, "k", 1, limits)
						if err != nil {
							t.Error(err)
							return
						}
						if n := d.Results()[0].Leased; n > 0 {
							ended := time.Since(start)
							mu.Lock()
							takes[g%len(stores)] = append(takes[g%len(stores)], sliceTake{began, ended, int64(n)})
							mu.Unlock()
						}
						if d.Fallback {
							local.Add(1)
						}
						if d.Allowed {
							admitted.Add(1)
							lastAllowed.Store(int64(time.Since(start)))
						} else {
							denials.Add(1)
						}
						// Until nothing was admitted for longer than a slice lasts.
						if denials.Load() > 0 && time.Since(start)-time.Duration(lastAllowed.Load()) > sliceLife+50*time.Millisecond {
							return
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%d admitted of %d, %d denied, %d decided in process by a Fallback", admitted.Load(), l.Quota, denials.Load(), local.Load())
			if local.Load() > 0 {
				t.Fatalf("the Fallback decided %d requests in process: %+v", local.Load(), stores[0].(*Fallback).Health())
			}
			if admitted.Load() > int64(l.Quota) {
				t.Errorf("%d admitted, more than the limit %d", admitted.Load(), l.Quota)
			}
			slice := int64(max(1, l.Quota/512)) // the most one slice holds beyond its cost
			var lapsing, lapsed int64           // slices that may have lapsed, and their units
			for _, ts := range takes {
				for _, r := range ts {
					if mayLapse(r, ts) {
						lapsing++
						lapsed += r.units
					}
				}
			}
			t.Logf("%d slices may have lapsed by the times measured, %d units", lapsing, lapsed)
			if unspent := int64(l.Quota) - admitted.Load(); unspent > int64(len(stores))*slice+lapsed {
				t.Errorf("%d admitted: %d of the limit went unspent, more than a slice per instance and the %d units of the %d slices that may have lapsed", admitted.Load(), unspent, lapsed, lapsing)
			}
		})
	}
}

// sliceTake is a request that took a slice: when it began and ended, from
// the start of the test, and the slice's units.
type sliceTake struct {
	began, ended time.Duration
	units        int64
}

// mayLapse reports whether r's slice may have lapsed with units unspent,
// given ts, all the slices its instance took. It was spent when the
// instance took another after r ended, so after r's slice was granted,
// and before r began plus sliceLife, so before the slice could end, but
// for a slot end: an instance takes a slice only when its last is spent
// or over, one request at a time. Otherwise it may have lapsed: nothing
// was taken after it (the instance's last), or not soon enough (a slow
// call to Redis, a goroutine not run).
func mayLapse(r sliceTake, ts []sliceTake) bool {
	for _, next := range ts {
		if next.began >= r.ended && next.ended < r.began+sliceLife {
			return false
		}
	}
	return true
}

// TestLeasesAreBounded: an instance keeps slices for at most
// maxLeasedKeys keys, however many keys come.
func TestLeasesAreBounded(t *testing.T) {
	t.Parallel()
	var l sliceTable
	limits := limitsOf(t, ratelimit.Limit{Quota: 100, Window: time.Minute, Leased: true})
	given, set, err := limitset.Check("k", 1, limits)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxLeasedKeys + maxLeasedKeys/2 {
		key := fmt.Sprint("key-", i)
		if _, next, _ := l.spend(&request{key: key, cost: 1, limits: given, set: set}, false); next != takeSlices {
			t.Fatalf("key %d: got %d, want takeSlices: a slice from nothing", i, next)
		}
		l.abandon(key, false)
	}
	n := 0
	for i := range l.shards {
		n += len(l.shards[i].keys)
	}
	if n > maxLeasedKeys {
		t.Errorf("%d keys hold slices, want at most %d", n, maxLeasedKeys)
	}
}

// TestLeasedSetAllOrNone: two instances hammer a set of two leased limits,
// a fixed window far from spent beside a token bucket that holds the
// pace, on a real redis-server. A slice is counted only where both limits
// grant theirs: what the window counts on Redis beyond what was admitted
// (slices out when the run stops) stays under 1% of its quota, and no
// request is denied by the window, which always had room.
func TestLeasedSetAllOrNone(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	// The bucket admits 100 a second: less than two instances ask on a
	// machine busy enough to run the race detector beside eight busy
	// loops on two cores (about 400 a second, where a bucket of 1,000
	// never denied). The window has room for twice what the bucket admits
	// in the run's longest minute (6,100), so that it never denies.
	window := ratelimit.Limit{Quota: 12_200, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Leased: true}
	bucket := ratelimit.Limit{Quota: 100, Window: time.Second, Burst: 100, Algorithm: ratelimit.TokenBucket, Leased: true}
	limits := limitsOf(t, window, bucket)
	const prefix, key = "allornone:", "hot"
	var inst []*Redis
	for range 2 {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		inst = append(inst, newStore(t, c, RedisOptions{Prefix: prefix}))
	}
	var admitted, denied, byWindow, failed, refills atomic.Int64
	// A second (three in the long run), and on until the bucket has
	// denied a hundred requests: a loaded machine asks slower, and the
	// set is tried only where demand exceeds the bucket. At most a
	// minute.
	start := time.Now()
	stop, giveUp := start.Add(time.Second), start.Add(time.Minute)
	if longRuns() {
		stop = start.Add(3 * time.Second)
	}
	running := func() bool {
		now := time.Now()
		return now.Before(giveUp) && (now.Before(stop) || denied.Load() < 100)
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for running() {
				d, err := inst[g%len(inst)].Allow(context.Background(), key, 1, limits)
				switch {
				case err != nil:
					failed.Add(1)
				case d.Allowed:
					admitted.Add(1)
					if d.Results()[0].Leased > 0 {
						refills.Add(1)
					}
				default:
					denied.Add(1)
					if !d.Results()[0].Allowed {
						byWindow.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	_, set, err := limitset.Check(key, 1, limits)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	counted, err := client.Get(context.Background(), redisKey(prefix, key, set.Limits[0].Suffix)).Int64()
	if err != nil {
		t.Fatal(err)
	}
	unspent := counted - admitted.Load()
	t.Logf("admitted %d (%d took slices), denied %d; the window counted %d: %d counted and not spent (%.3f%% of its quota)",
		admitted.Load(), refills.Load(), denied.Load(), counted, unspent, 100*float64(unspent)/float64(window.Quota))
	switch {
	case failed.Load() > 0:
		t.Errorf("%d calls failed", failed.Load())
	case denied.Load() == 0:
		t.Error("nothing denied: the bucket never held the pace, and the set was not tried")
	case refills.Load() == 0:
		t.Error("no request took slices: the set was never leased")
	case unspent < 0:
		t.Errorf("admitted %d, more than the window counted (%d)", admitted.Load(), counted)
	case unspent > int64(window.Quota/100):
		t.Errorf("%d units of the window counted and not spent, want at most 1%% of its quota (%d)", unspent, window.Quota/100)
	}
	if byWindow.Load() > 0 {
		t.Errorf("the window, which always had room, denied %d requests", byWindow.Load())
	}
}

// slowHook delays every command and pipeline by its delay: a Redis that
// is slow but healthy, as behind a slow network. It counts the calls
// that ran out of time, however it came: what a Fallback may rightly
// take for Redis failing.
type slowHook struct {
	delay   time.Duration
	overran *atomic.Int64
}

func (h slowHook) count(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		h.overran.Add(1)
	}
	return err
}

func (h slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(h.delay)
		return h.count(next(ctx, cmd))
	}
}
func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(h.delay)
		return h.count(next(ctx, cmds))
	}
}

// TestLeasedWaitIsNoOutage: a Fallback with a budget of 100ms over a
// healthy Redis that takes 30ms a call, 32 goroutines spending a leased
// key to its end, where its last units are decided one by one: requests
// that wait for another's answer never count as Redis failing. Each
// failure the Fallback counts is a call of Redis's own that ran out of
// time (on an idle machine none does, and nothing is decided in
// process). A request whose own time ran out after it waited is decided
// in process, aside, never failed, and what it admitted reaches Redis:
// Redis counts at least every admission.
func TestLeasedWaitIsNoOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	r := newStore(t, c, RedisOptions{Prefix: uniquePrefix()})
	limit := ratelimit.Limit{Quota: 500, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Leased: true}
	limits := limitsOf(t, limit)
	if _, err := r.Allow(context.Background(), "warm", 1, limits); err != nil {
		t.Fatal(err) // Redis has the store's code now: one call a decision
	}
	var overran atomic.Int64
	c.AddHook(slowHook{30 * time.Millisecond, &overran})
	f, err := NewFallback(r, FallbackOptions{Budget: 100 * time.Millisecond, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var admitted, denied, local, localAdmitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for range 40 {
				d, err := f.Allow(context.Background(), "hot", 1, limits)
				switch {
				case err != nil:
					t.Errorf("goroutine %d: %v", g, err)
					return
				case d.Fallback:
					local.Add(1)
					if d.Allowed {
						localAdmitted.Add(1)
					}
				case d.Allowed:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	h := f.Health()
	aside := int64(f.impl.Aside())
	t.Logf("admitted %d, denied %d, decided in process %d (%d admitted), of them aside %d; failures %d, outages %d; calls that ran out of time %d",
		admitted.Load(), denied.Load(), local.Load(), localAdmitted.Load(), aside, h.Failures, h.Outages, overran.Load())
	switch {
	case h.Failures > uint64(overran.Load()+r.batch.late.Load()):
		t.Errorf("a healthy Redis taken for failing: %d failures, but only %d calls ran out of time, %d of them before they were sent (last: %v)", h.Failures, overran.Load()+r.batch.late.Load(), r.batch.late.Load(), h.LastError)
	case h.Failures == 0 && local.Load() > aside:
		t.Errorf("%d decided in process with no failure, %d of them aside", local.Load(), aside)
	case local.Load() == 0 && admitted.Load() > 500:
		t.Errorf("admitted %d, over the quota of 500", admitted.Load())
	case local.Load() == 0 && denied.Load() == 0:
		t.Error("nothing denied: the key was not spent, and its last units not tried")
	}
	if h.Failures == 0 {
		// Only asides: once they reached Redis, it counts every admission
		// (and the units of slices taken and not spent).
		waitFor(t, "the decisions made aside to reach Redis", func() bool { return f.Health().Waiting == 0 })
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer c.Close()
		if n, all := spent(t, c, r, "hot", limit), admitted.Load()+localAdmitted.Load(); n < all {
			t.Errorf("Redis counts %d, but %d were admitted, %d of them aside", n, all, localAdmitted.Load())
		}
	}
}
