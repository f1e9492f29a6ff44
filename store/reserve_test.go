package store

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestReservationsHoldAtOnce is the overrun reservations end, on a real
// redis-server with two instances: 100 requests at once, each estimating
// 1,000 tokens, against 40,000 tokens a minute. Each admitted request
// holds its estimate until it ends, so exactly 40 are admitted while
// they are all in flight; each then uses what it estimated, and the
// limit ends with 40,000 charged, no debt. Without reservations all 100
// passed and the limit ended 60,000 in debt.
func TestReservationsHoldAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	prefix := uniquePrefix()
	var instances [2]*Redis
	for i := range instances {
		instances[i] = newStore(t, redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64}), RedisOptions{Prefix: prefix})
	}
	limit := ratelimit.Limit{Name: "tokens", Quota: 40_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Usage: true}
	limits := limitsOf(t, limit)
	ctx := context.Background()
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	decisions := make(chan struct {
		s *Redis
		d ratelimit.Decision
	}, 100)
	start := make(chan struct{})
	for i := range 100 {
		s := instances[i%2]
		wg.Go(func() {
			<-start
			d, err := s.Allow(ctx, "client", 1000, limits)
			switch {
			case err != nil:
				t.Error(err)
			case d.Allowed:
				admitted.Add(1)
				decisions <- struct {
					s *Redis
					d ratelimit.Decision
				}{s, d}
			default:
				denied.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(decisions)
	if admitted.Load() != 40 || denied.Load() != 60 {
		t.Fatalf("admitted %d, denied %d; want 40 and 60: each admitted request holds 1,000 of 40,000", admitted.Load(), denied.Load())
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if n := spent(t, c, instances[0], "client", limit); n != 0 {
		t.Errorf("before any request ended, the limit counts %d; want 0: holds take nothing", n)
	}
	for a := range decisions {
		e, err := a.s.End(ctx, "client", 1000, limits, a.d)
		if err != nil {
			t.Fatal(err)
		}
		// Ending again (a resend) counts nothing.
		if _, err := a.s.End(ctx, "client", 1000, limits, a.d); err != nil {
			t.Fatal(err)
		}
		if r := e.Results()[0]; r.Remaining < 0 {
			t.Fatalf("remaining %d after End", r.Remaining)
		}
	}
	if n := spent(t, c, instances[0], "client", limit); n != 40_000 {
		t.Errorf("after every request ended (twice), the limit counts %d; want 40,000: each charged once", n)
	}
	d, err := instances[0].Peek(ctx, "client", 1, limits)
	if err != nil || d.Allowed || d.Results()[0].Remaining != 0 {
		t.Errorf("Peek after: %+v, %v; want the limit spent, not in debt", d.Results(), err)
	}
}

// TestReservationsLapse: on a pinned clock, a hold not renewed lapses
// HoldLife after it was made and is given back, one renewed does not,
// and one settled is not renewed back. An end after its hold lapsed
// charges its usage.
func TestReservationsLapse(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(t *testing.T) (ratelimit.Store, func(time.Duration), func())
	}{
		{"redis", func(t *testing.T) (ratelimit.Store, func(time.Duration), func()) {
			mr, clock := newMiniredis(t)
			s := newStore(t, newClient(t, mr.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
			return s, clock.Advance, func() { s.renewHolds(s.holds.Held()) }
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, advance, renew := tt.make(t)
			limits := limitsOf(t, ratelimit.Limit{Quota: 10, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Usage: true})
			ctx := context.Background()
			allow := func(cost int) ratelimit.Decision {
				t.Helper()
				d, err := s.Allow(ctx, "k", cost, limits)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			kept := allow(6)   // renewed
			lapsed := allow(4) // not: ended before the test renews
			if !kept.Allowed || !lapsed.Allowed || kept.Slot == "" || lapsed.Slot == "" || kept.Slot == lapsed.Slot {
				t.Fatalf("got %+v and %+v; want both admitted with ids of their own", kept, lapsed)
			}
			if d := allow(1); d.Allowed || d.Results()[0].Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > time.Second {
				t.Fatalf("with 10 of 10 held: %+v; want denied, none left, retry within a second", d.Results())
			}
			// Only kept's hold is renewed from now on: forget lapsed's.
			s.(*Redis).holds.Drop(mustID(t, lapsed.Slot))
			for range 2 {
				advance(20 * time.Second)
				renew()
			}
			// 40s on: lapsed's hold is gone, kept's is still there.
			if d := allow(4); !d.Allowed || d.Results()[0].Remaining != 0 {
				t.Fatalf("after lapsed's hold lapsed: %+v; want 4 admitted, leaving none", d.Results())
			}
			e, err := s.End(ctx, "k", 3, limits, lapsed)
			if err != nil {
				t.Fatal(err)
			}
			if r := e.Results()[0]; r.Remaining != 0 || r.Allowed {
				t.Fatalf("ending the lapsed request with usage 3: %+v; want its usage charged: 3 used, 10 held", r)
			}
			e, err = s.End(ctx, "k", 1, limits, kept)
			if err != nil {
				t.Fatal(err)
			}
			if r := e.Results()[0]; r.Remaining != 2 {
				t.Fatalf("ending kept with usage 1 of 6: %+v; want 2 left (4 used, 4 held)", r)
			}
			renew() // kept was settled: nothing renews it back
			if d := allow(2); !d.Allowed {
				t.Fatalf("after kept settled: %+v; want 2 admitted", d.Results())
			}
		})
	}
}

func mustID(t *testing.T, slot string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(slot, 10, 64)
	if err != nil {
		t.Fatalf("slot %q is not an id: %v", slot, err)
	}
	return id
}

// TestFaultReservationsThroughOutage is the overrun of
// TestReservationsHoldAtOnce through two Fallbacks (Instances 2), with
// Redis stopped (SIGSTOP) in the middle: 50 requests at once on Redis,
// each reserving 1,000 tokens of 40,000; then, Redis stopped, 20 of the
// admitted end with usage 1,000, and 50 more come at once, decided in
// process from what Redis last said was left, reservations included;
// then the rest end, and Redis resumes. Redis ends charged what was used, and at most one charge more
// per instance per outage: the end under way when Redis was marked down,
// which Redis may run late, within its deadline's margin, after the
// instance charged it in process (docs/production.md).
func TestFaultReservationsThroughOutage(t *testing.T) {
	redistest.RequireFaults(t)
	srv := persistent(t)
	prefix := uniquePrefix()
	f1, client := newOutageFallback(t, srv, prefix, 2)
	f2, _ := newOutageFallback(t, srv, prefix, 2)
	fs := []*Fallback{f1, f2}
	limit := ratelimit.Limit{Name: "tokens", Quota: 40_000, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Usage: true}
	limits := limitsOf(t, limit)
	ctx := context.Background()
	type admitted struct {
		f *Fallback
		d ratelimit.Decision
	}
	var inProcess atomic.Int64 // decisions made in process, admitted or not
	burst := func() []admitted {
		var mu sync.Mutex
		var out []admitted
		var wg sync.WaitGroup
		for i := range 50 {
			f := fs[i%2]
			wg.Go(func() {
				d, err := f.Allow(ctx, "client", 1000, limits)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Fallback {
					inProcess.Add(1)
				}
				if d.Allowed {
					mu.Lock()
					out = append(out, admitted{f, d})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return out
	}
	before := burst()
	onRedis := inProcess.Load() == 0 // a loaded machine may miss the budget, and decide some in process
	recovered := []uint64{f1.Health().Recoveries, f2.Health().Recoveries}
	srv.Pause()
	end := func(as []admitted) {
		for _, a := range as {
			if _, err := a.f.End(ctx, "client", 1000, limits, a.d); err != nil {
				t.Fatal(err)
			}
		}
	}
	end(before[:20]) // their ends find Redis stopped: charged in process
	for i, f := range fs {
		if f.Health().Decisions == "redis" {
			t.Fatalf("instance %d still decides on Redis: Redis did not stop under the traffic", i)
		}
	}
	inProcess.Store(0)
	during := burst()
	if inProcess.Load() == 0 {
		t.Fatal("no request of the second burst was decided in process")
	}
	end(before[20:])
	end(during)
	srv.Resume()
	for i, f := range fs {
		waitFor(t, "the backlog to reach Redis", func() bool {
			h := f.Health()
			return h.Decisions == "redis" && h.Recoveries > recovered[i] && h.Waiting == 0 && !f.impl.Reconciling()
		})
	}
	used := int64(1000 * (len(before) + len(during)))
	got := spent(t, client, f1.redis, "client", limit)
	outages := f1.Health().Outages + f2.Health().Outages
	t.Logf("on Redis: %d admitted at once; Redis stopped: %d more of 50 decided (%d in process); used %d, Redis charged %d (%d outages), debt %d",
		len(before), len(during), inProcess.Load(), used, got, outages, max(got-40_000, 0))
	if onRedis && len(before) != 40 {
		t.Errorf("on Redis, %d admitted at once; want 40", len(before))
	}
	if over := 1000 * int64(outages); got < used || got > used+over {
		t.Errorf("Redis charged %d; want the %d used, and at most %d more (an end under way per outage)", got, used, over)
	}
}
