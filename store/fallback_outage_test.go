package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// The limit across an outage: a key spends part of a 20-per-hour limit
// on Redis, then requests keep coming from several goroutines while Redis
// hangs or dies and comes back. An hour is far longer than the test, so
// the whole run is one window: what every instance admits in all must
// stay within the limit, and Redis must know of every admission, once.

const outageQuota = 20

// outageFault is a fault of a redis-server with its data on disk.
type outageFault struct {
	name   string
	inject func(t *testing.T, srv *redistest.Server)
	lost   bool // Redis comes back without its data
}

var outageFaults = []outageFault{
	{"hung (SIGSTOP) 1s", func(t *testing.T, srv *redistest.Server) {
		srv.Pause()
		time.Sleep(time.Second)
		srv.Resume()
	}, false},
	{"killed, back with its data", func(t *testing.T, srv *redistest.Server) {
		srv.Kill()
		time.Sleep(500 * time.Millisecond)
		if err := srv.Restart(); err != nil {
			t.Error(err)
		}
	}, false},
}

// persistent starts a redis-server that writes every change to disk
// before it answers, so that a kill loses nothing.
func persistent(t *testing.T) *redistest.Server {
	return redistest.Require(t, "--appendonly", "yes", "--appendfsync", "always")
}

// outageRun drives the instances through a fault: 8 admissions on Redis,
// through each instance in turn, then, from the fault on, 4 goroutines per instance
// asking until every instance is back on Redis, plus 300ms. It returns
// how many were admitted in all.
func outageRun(t *testing.T, fs []*Fallback, limit ratelimit.Limit, fault func()) int {
	ctx := context.Background()
	l := limitsOf(t, limit) // one set for the run, as a Limiter has
	var admitted atomic.Int64
	for i := range 8 {
		// On a loaded machine a decision may miss the budget and be made
		// in process: it counts the same, and reaches Redis on recovery.
		d, err := fs[i%len(fs)].Allow(ctx, "k", 1, l)
		if err != nil || !d.Allowed {
			t.Fatalf("before the fault: %+v, %v", d, err)
		}
		admitted.Add(1)
	}
	recovered := make([]uint64, len(fs))
	for i, f := range fs {
		waitFor(t, "decisions on Redis before the fault", func() bool { return f.Health().Decisions == "redis" && !f.impl.Reconciling() })
		recovered[i] = f.Health().Recoveries
	}
	// The requests start with the fault: before it, they would spend the
	// limit on Redis, and the deny cache would answer them all along.
	faulted := make(chan struct{})
	go func() {
		defer close(faulted)
		fault()
	}()
	time.Sleep(20 * time.Millisecond)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range fs {
		for range 4 {
			wg.Go(func() {
				allowUntil(t, stop, f, "k", l, func(ratelimit.Decision) bool {
					admitted.Add(1)
					time.Sleep(time.Millisecond)
					return true
				})
			})
		}
	}
	<-faulted
	for i, f := range fs {
		waitFor(t, "decisions to return to Redis", func() bool { st := f.Health(); return st.Decisions == "redis" && st.Recoveries > recovered[i] })
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	return int(admitted.Load())
}

// counted returns how many units Redis holds as spent for key "k" under
// l: for a token bucket, the tokens it misses, a token begun counted whole.
func counted(t *testing.T, client *redis.Client, s *Redis, l ratelimit.Limit) int {
	t.Helper()
	n := spent(t, client, s, "k", l)
	if l.Algorithm == ratelimit.TokenBucket {
		unit := compileLimit(l).Unit
		n = (n + unit - 1) / unit
	}
	return int(n)
}

// newOutageFallback returns a Fallback over srv with the fault tests'
// budget and probe interval, and instances instances (0: 1).
func newOutageFallback(t *testing.T, srv *redistest.Server, prefix string, instances int) (*Fallback, *redis.Client) {
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	opts := FallbackOptions{Budget: faultBudget, ProbeInterval: faultInterval, Logger: quietLogger, Instances: instances}
	f, err := NewFallback(newStore(t, client, RedisOptions{Prefix: prefix}), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// Let it read Redis's clock, as a running service has.
	warm := limitsOf(t, ratelimit.Limit{Quota: 1000, Window: time.Hour})
	waitFor(t, "the Fallback to read Redis's clock", func() bool {
		f.Allow(context.Background(), "warm", 1, warm)
		return f.impl.ClockRead()
	})
	return f, client
}

var allAlgorithms = []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.Monthly}

// outageLimit is a limit of outageQuota counted with a, per hour or, for
// a calendar, per month in Paris.
func outageLimit(a ratelimit.Algorithm) ratelimit.Limit {
	if a == ratelimit.Monthly {
		return ratelimit.Limit{Algorithm: a, Quota: outageQuota, Zone: "Europe/Paris"}
	}
	return ratelimit.Limit{Quota: outageQuota, Window: time.Hour}.Using(a)
}

// TestFaultOutageKeepsTheLimit: one instance, each algorithm, each fault.
func TestFaultOutageKeepsTheLimit(t *testing.T) {
	redistest.RequireFaults(t)
	for _, fault := range outageFaults {
		for _, a := range allAlgorithms {
			t.Run(fault.name+"/"+a.String(), func(t *testing.T) {
				srv := persistent(t)
				f, client := newOutageFallback(t, srv, "o:", 0)
				l := outageLimit(a)
				admitted := outageRun(t, []*Fallback{f}, l, func() { fault.inject(t, srv) })
				inRedis := counted(t, client, f.redis, l)
				t.Logf("%s, %v: %d admitted in all (limit %d); Redis counts %d; %+v",
					fault.name, a, admitted, outageQuota, inRedis, f.Health())
				if admitted > outageQuota {
					t.Errorf("%d admitted across the outage, more than the limit %d", admitted, outageQuota)
				}
				// A decision Redis made just before it hung, whose answer came
				// too late, counts in Redis and in process: at most one per
				// request under way.
				if want := min(admitted, outageQuota); inRedis < want || inRedis > admitted+4 {
					t.Errorf("Redis counts %d, want the %d admitted (up to 4 more)", inRedis, admitted)
				}
			})
		}
	}
}

// TestFaultOutageTwoInstances: two instances sharing one Redis, each
// with Instances 2, both deciding the key before and through the
// outage. In process, instance i may spend s_i = min(ceil(Q/N),
// ceil(R_i/N)) of what Redis last told it was left (R_i). Until the first
// instance is back on Redis, all admit at most u + sum(s_i) (u: spent
// before). The first instance back hands Redis its s_i, and Redis then
// admits up to the limit before the others have handed theirs: in all, at
// most Q + the s_j of the others, here 20 + 6 (8 spent on Redis before
// the fault), or 20 + 10 where an instance has heard nothing of the key
// since an outage of its own, when its share is a whole ceil(Q/N).
func TestFaultOutageTwoInstances(t *testing.T) {
	redistest.RequireFaults(t)
	const n = 2
	for _, fault := range outageFaults {
		for _, a := range allAlgorithms {
			t.Run(fault.name+"/"+a.String(), func(t *testing.T) {
				srv := persistent(t)
				f1, client := newOutageFallback(t, srv, "o:", n)
				f2, _ := newOutageFallback(t, srv, "o:", n)
				l := outageLimit(a)
				var shares []int
				admitted := outageRun(t, []*Fallback{f1, f2}, l, func() {
					for _, f := range []*Fallback{f1, f2} {
						// An instance that has heard nothing of the key since
						// an outage of its own (a decision before the fault
						// that missed the budget on a loaded machine) keeps
						// what it counted in process, under a whole share.
						share := (outageQuota + n - 1) / n
						if heard, ok := f.impl.Seen("k", compileLimit(l), f.impl.Now()); ok {
							share = min(share, int(heard+n-1)/n)
						}
						shares = append(shares, share)
					}
					fault.inject(t, srv)
				})
				bound := outageQuota + max(shares[0], shares[1])
				inRedis := counted(t, client, f1.redis, l)
				t.Logf("%s, %v, 2 instances: %d admitted in all (limit %d; shares in process %v, bound %d); Redis counts %d",
					fault.name, a, admitted, outageQuota, shares, bound, inRedis)
				if admitted > bound {
					t.Errorf("%d admitted across the outage, more than the bound %d", admitted, bound)
				}
				// A token bucket cannot count past empty.
				if want := min(admitted, outageQuota); inRedis < want || inRedis > admitted+8 {
					t.Errorf("Redis counts %d, want the %d admitted (up to 8 more)", inRedis, want)
				}
			})
		}
	}
}
