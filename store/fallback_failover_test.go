package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// Failover tests: a master is killed under load and its replica promoted,
// by Redis Cluster or by Sentinel. No request may fail, decisions move to
// memory and back once, and they are back on Redis by the first or second
// probe after the promotion completes.

// failoverKeys is how many keys the load spreads over; enough for every
// master of a cluster to own many.
const failoverKeys = 1000

// failoverKey returns the i-th key of the load.
func failoverKey(i int) string { return fmt.Sprintf("user:%d", i%failoverKeys) }

// failoverRun is what a failover under load did.
type failoverRun struct {
	requests, local, failed atomic.Int64
	firstErr                atomic.Value // error
	promoted                time.Time    // when WaitFailover returned
	health                  transitions
}

// underFailover sends decisions through f from 8 goroutines, each
// cycling over failoverKeys keys, calls kill after a second, then
// failover, which returns once the promotion is complete; and it keeps
// the load up for a second more.
func underFailover(t *testing.T, f *Fallback, run *failoverRun, kill func(), failover func(ctx context.Context) error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	limit := limitsOf(t, ratelimit.PerMinute(1_000_000))
	for w := range 8 {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i += 8 {
				d, err := f.Allow(context.Background(), failoverKey(i), 1, limit)
				run.requests.Add(1)
				switch {
				case err != nil:
					if run.failed.Add(1) == 1 {
						run.firstErr.Store(err)
					}
				case d.Fallback:
					run.local.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second)
	kill()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := failover(wctx)
	cancel()
	run.promoted = time.Now()
	if err == nil {
		time.Sleep(time.Second)
	}
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
}

// checkFailover reports what run did and fails t unless no request failed,
// health went down once and up once, and up by the first or second probe
// after the promotion.
func checkFailover(t *testing.T, what string, run *failoverRun) {
	t.Helper()
	ups, at := run.health.get()
	var back time.Duration
	if len(ups) >= 2 {
		back = at[1].Sub(run.promoted)
	}
	t.Logf("%s: %d requests, %d failed, %d decided in process; health changes %v; back on Redis %v after the promotion completed (probe interval %v)",
		what, run.requests.Load(), run.failed.Load(), run.local.Load(), ups, back, faultInterval)
	if n := run.failed.Load(); n > 0 {
		t.Errorf("%d requests failed; the first: %v", n, run.firstErr.Load())
	}
	if len(ups) != 2 || ups[0] || !ups[1] {
		t.Fatalf("health changes %v, want one down and one up: %v (promoted at +%v)", ups, &run.health, run.promoted.Sub(at[0]).Round(time.Millisecond))
	}
	run.health.checkBack(t, what, run.promoted)
}

// newFailoverFallback returns a Fallback over client with the fault
// tests' budget and probe interval, recording health changes in run.
func newFailoverFallback(t *testing.T, client RedisClient, run *failoverRun) *Fallback {
	t.Helper()
	f, err := NewFallback(newStore(t, client, RedisOptions{}), FallbackOptions{Budget: steadyBudget, ProbeInterval: faultInterval,
		Logger: quietLogger, HealthHook: run.health.hook})
	if err != nil {
		t.Fatal(err)
	}
	f.impl.OnProbe(run.health.probed)
	t.Cleanup(func() { f.Close() })
	return f
}

// A master of a 3-master Redis Cluster is killed under load, and its
// replica takes over.
func TestFaultClusterFailover(t *testing.T) {
	redistest.RequireFaults(t)
	cluster := redistest.RequireClusterWithReplicas(t, 3, 1)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	var run failoverRun
	f := newFailoverFallback(t, client, &run)
	victim, err := cluster.MasterFor(context.Background(), "{"+failoverKey(0)+"}")
	if err != nil {
		t.Fatal(err)
	}
	underFailover(t, f, &run, victim.Kill, func(ctx context.Context) error {
		_, err := cluster.WaitFailover(ctx, victim)
		return err
	})
	checkFailover(t, "cluster master killed", &run)
}

// A master watched by three Sentinels is killed under load, and they
// promote its replica.
func TestFaultSentinelFailover(t *testing.T) {
	redistest.RequireFaults(t)
	s := redistest.RequireSentinel(t)
	client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	var run failoverRun
	f := newFailoverFallback(t, client, &run)
	underFailover(t, f, &run, s.Master.Kill, func(ctx context.Context) error {
		_, err := s.WaitFailover(ctx, s.Master.Addr)
		return err
	})
	checkFailover(t, "Sentinel master killed", &run)
}
