package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
)

// Tests of batched decisions on a real Redis Cluster: each master's
// batches go as pipelines of script runs (see clusterBatcher).

// sendCounter counts, at a cluster client, the runs (FCALL, EVALSHA or
// EVAL) sent alone, and the pipelines sent with the commands in them and
// the EVALs and FCALLs among those.
type sendCounter struct {
	alone, pipelines, piped, pipedEvals, pipedFCalls atomic.Int64
}

func (h *sendCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sendCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" || name == "fcall" {
			h.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *sendCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		h.piped.Add(int64(len(cmds)))
		for _, c := range cmds {
			switch c.Name() {
			case "eval":
				h.pipedEvals.Add(1)
			case "fcall":
				h.pipedFCalls.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// sends returns how many times the client sent something: script runs
// alone and pipelines.
func (h *sendCounter) sends() int64 { return h.alone.Load() + h.pipelines.Load() }

// clusterClient returns a client of cluster that honors context deadlines,
// counting what it sends.
func clusterClient(t *testing.T, cluster *redistest.Cluster) (*redis.ClusterClient, *sendCounter) {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	h := &sendCounter{}
	c.AddHook(h)
	return c, h
}

// clusterStore returns a store over client with its deny cache off and one
// run at a time per master, so that concurrent requests of a master wait
// and go together.
func clusterStore(t *testing.T, client *redis.ClusterClient) *Redis {
	t.Helper()
	s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache, Logger: quietLogger})
	if s.masters == nil {
		t.Fatal("a *redis.ClusterClient store does not batch")
	}
	s.masters.maxRuns = 1
	return s
}

// keysOn returns n keys whose slots the master at addr owns, as client
// sees it.
func keysOn(t *testing.T, client *redis.ClusterClient, addr, name string, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if i > 100*n {
			t.Fatalf("no %d keys of master %s among %d", n, addr, i)
		}
		key := fmt.Sprintf("%s:%d", name, i)
		m, err := client.MasterForKey(context.Background(), "{"+key+"}")
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == addr {
			keys = append(keys, key)
		}
	}
	return keys
}

// TestClusterBatchDecidesExactly: 48 goroutines send requests for keys
// spread over the three masters of a real cluster, under a single limit
// and under a pair with another script: each key admits exactly its
// limit, no request fails, and far fewer pipelines and lone runs than
// requests were sent.
func TestClusterBatchDecidesExactly(t *testing.T) {
	cluster := redistest.SharedCluster(t) // first: its servers' goroutines outlive t
	checkLeaks(t)
	client, counter := clusterClient(t, cluster)
	s := clusterStore(t, client)
	sets := []struct {
		limits *ratelimit.Limits
		want   int
	}{
		{limitsOf(t, ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.FixedWindow)), 10},
		{limitsOf(t, ratelimit.Limit{Quota: 8, Window: time.Hour}), 8},
		{limitsOf(t, ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.SlidingLog), ratelimit.Limit{Quota: 7, Window: time.Hour}.Using(ratelimit.TokenBucket)), 5},
	}
	var keys []string
	for i, m := range cluster.Masters {
		keys = append(keys, keysOn(t, client, m.Addr, fmt.Sprintf("m%d", i), 20)...)
	}

	var o outcomes
	var wg sync.WaitGroup
	const goroutines = 48
	for g := range goroutines {
		wg.Go(func() {
			for i := range keys {
				k := (g + i) % len(keys) // each goroutine starts elsewhere
				d, err := s.Allow(context.Background(), keys[k], 1, sets[k%len(sets)].limits)
				o.record(keys[k], d, err)
			}
		})
	}
	wg.Wait()
	for k, key := range keys {
		if want := sets[k%len(sets)].want; o.passed[key] != want || o.failed[key] != 0 {
			t.Errorf("key %s: %d passed, %d failed; want %d passed, none failed", key, o.passed[key], o.failed[key], want)
		}
	}
	requests := int64(goroutines * len(keys))
	t.Logf("%d requests: %d runs alone, %d pipelines of %d runs", requests, counter.alone.Load(), counter.pipelines.Load(), counter.piped.Load())
	if counter.pipelines.Load() == 0 || counter.piped.Load() < 2*counter.pipelines.Load() {
		t.Errorf("%d pipelines of %d runs: the requests were not batched", counter.pipelines.Load(), counter.piped.Load())
	}
	if n := counter.sends(); n > requests/2 {
		t.Errorf("%d requests took %d sends, want at most half as many", requests, n)
	}
}

// pausedMaster pauses the commands of cluster's first master for d, and
// sends a request for one of its keys, which runs alone and holds the
// master's one run slot until the pause ends: the requests that follow
// for its keys wait and go together. It returns a channel closed when that
// request returns.
func pausedMaster(t *testing.T, s *Redis, client *redis.ClusterClient, master *redistest.Server, d time.Duration) <-chan struct{} {
	t.Helper()
	first := keysOn(t, client, master.Addr, "first", 1)[0]
	l := limitsOf(t, ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.FixedWindow))
	if _, err := s.Allow(context.Background(), first, 1, l); err != nil { // the client knows the slots and has a connection
		t.Fatal(err)
	}
	pauseAll(t, master, d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.Allow(ctx, first, 1, l); err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "the first run to start", func() bool {
		b := s.masters.batcher(master.Addr)
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.runs == 1
	})
	return done
}

// TestClusterBatchLoadsScripts: on the scripts' path, after SCRIPT FLUSH
// on every master, a batch of requests whose scripts a master lacks gets
// NOSCRIPT, and the store sends them again as EVAL: none fails, each is
// counted once.
func TestClusterBatchLoadsScripts(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	client, counter := clusterClient(t, cluster)
	s := clusterStore(t, client)
	s.fn.pin(pathScripts)
	master := cluster.Masters[0]
	ctx := context.Background()
	err := client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.ScriptFlush(ctx).Err() })
	if err != nil {
		t.Fatal(err)
	}
	// The first request loads only the fixed window's script, which the
	// batch does not use.
	running := pausedMaster(t, s, client, master, 300*time.Millisecond)
	l := []ratelimit.Limit{ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.FixedWindow), ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.TokenBucket)}
	pair := limitsOf(t, l...)
	keys := keysOn(t, client, master.Addr, "noscript", 10)
	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Go(func() {
			if d, err := s.Allow(ctx, key, 1, pair); err != nil || !d.Allowed {
				t.Errorf("key %s: got %+v, %v; want allowed", key, d, err)
			}
		})
	}
	wg.Wait()
	<-running
	if counter.pipedEvals.Load() == 0 {
		t.Errorf("no EVAL was pipelined: the batch did not meet NOSCRIPT (%d pipelines of %d runs)", counter.pipelines.Load(), counter.piped.Load())
	}
	for _, key := range keys {
		if v, err := client.Get(ctx, limitKey(s, key, l[0])).Result(); err != nil || v != "1" {
			t.Errorf("key %s: count %q, %v; want 1", key, v, err)
		}
	}
}

// TestClusterBatchGivesUp: while a master is paused and its run slot
// held, requests for its keys wait. Those whose caller gives up, or whose
// until passes, are not sent; those that reach Redis after their deadline
// are not decided; one that stays is counted once; and a request for
// another master's key is decided meanwhile, without waiting.
func TestClusterBatchGivesUp(t *testing.T) {
	cluster := redistest.SharedCluster(t) // first: its servers' goroutines outlive t
	checkLeaks(t)
	client, counter := clusterClient(t, cluster)
	s := clusterStore(t, client)
	master, other := cluster.Masters[0], cluster.Masters[1]
	l := ratelimit.Limit{Quota: 1000, Window: time.Hour}.Using(ratelimit.FixedWindow)
	set := limitsOf(t, l)
	ctx := context.Background()
	otherKey := keysOn(t, client, other.Addr, "other", 1)[0]
	if _, err := s.Allow(ctx, otherKey, 1, set); err != nil {
		t.Fatal(err)
	}
	keys := keysOn(t, client, master.Addr, "waiter", 21)
	gaveUp, expired, late, patient := keys[:10], keys[10:15], keys[15:20], keys[20]

	running := pausedMaster(t, s, client, master, time.Second)
	before := counter.pipelines.Load()
	var wg sync.WaitGroup
	for _, key := range gaveUp {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := s.Allow(ctx, key, 1, set); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s, which gave up: got %v, want its deadline exceeded", key, err)
			}
		})
	}
	for _, key := range expired {
		wg.Go(func() {
			_, err := s.decide(ctx, &request{key: key, cost: 1, limits: set.All(), set: checkedSet(t, key, set), until: time.Now().Add(50 * time.Millisecond)})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s, whose until passed: got %v, want its deadline exceeded", key, err)
			}
		})
	}
	for _, key := range late {
		wg.Go(func() {
			// A deadline long past on Redis's clock, in microseconds.
			if _, err := s.decide(ctx, &request{key: key, cost: 1, limits: set.All(), set: checkedSet(t, key, set), deadline: 1}); !errors.Is(err, errLate) {
				t.Errorf("%s, late: got %v, want errLate", key, err)
			}
		})
	}
	wg.Go(func() {
		if d, err := s.Allow(ctx, patient, 1, set); err != nil || !d.Allowed {
			t.Errorf("%s, which stayed: got %+v, %v; want allowed", patient, d, err)
		}
	})
	// Another master's key is decided while the first is paused.
	if d, err := s.Allow(ctx, otherKey, 1, set); err != nil || !d.Allowed {
		t.Errorf("another master's key: got %+v, %v; want allowed", d, err)
	}
	select {
	case <-running:
		t.Errorf("another master's request waited for the paused master")
	default:
	}
	wg.Wait()
	<-running
	if counter.pipelines.Load() == before {
		t.Error("no pipeline was sent: the waiters were not batched")
	}
	for _, key := range append(append(gaveUp, expired...), late...) {
		if n, err := client.Exists(ctx, limitKey(s, key, l)).Result(); err != nil || n != 0 {
			t.Errorf("%s was not to be decided, but Redis holds its key (%d, %v)", key, n, err)
		}
	}
	if v, err := client.Get(ctx, limitKey(s, patient, l)).Result(); err != nil || v != "1" {
		t.Errorf("%s: count %q, %v; want 1", patient, v, err)
	}
}

// checkedSet returns the compiled form of limits, as Allow checks them.
func checkedSet(t *testing.T, key string, limits *ratelimit.Limits) *spec.Set {
	t.Helper()
	_, set, err := limitset.Check(key, 1, limits)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestClusterBatchConformance runs the conformance suite on a real
// 3-master cluster with one run at a time per master, so that the suite's
// concurrent requests go in batches, through Redis Functions (pinned: no
// fall back to scripts). Like TestClusterConformance it is a long test:
// on a real clock, a loaded machine makes its steps late.
func TestClusterBatchConformance(t *testing.T) {
	t.Parallel()
	redistest.RequireFaults(t)
	cluster := redistest.RequireCluster(t, 3)
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
		prefix := uniquePrefix()
		stores := make([]ratelimit.Store, n)
		for i := range stores {
			client, _ := clusterClient(t, cluster)
			s := newStore(t, client, RedisOptions{Prefix: prefix})
			s.masters.maxRuns = 1
			s.fn.pin(pathFunctions)
			stores[i] = s
		}
		return stores, realClock{}
	}})
}

// TestFaultClusterBatchMasterDown: under batched load on a 3-master
// cluster that serves the slots it can (cluster-require-full-coverage
// no), one master is killed, or paused: the requests of the other masters'
// keys keep being decided, and none of them fails.
func TestFaultClusterBatchMasterDown(t *testing.T) {
	redistest.RequireFaults(t)
	for _, fault := range []string{"killed", "paused"} {
		t.Run(fault, func(t *testing.T) {
			cluster := redistest.RequireCluster(t, 3)
			for _, m := range cluster.Masters {
				c := newClient(t, m.Addr)
				if err := c.ConfigSet(context.Background(), "cluster-require-full-coverage", "no").Err(); err != nil {
					t.Fatal(err)
				}
			}
			client, counter := clusterClient(t, cluster)
			s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache, Logger: quietLogger})
			victim := cluster.Masters[0]
			set := limitsOf(t, ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow))

			type master struct {
				keys                     []string
				requests, failed, during atomic.Int64
				firstErr                 atomic.Value
			}
			masters := make([]*master, len(cluster.Masters))
			for i, m := range cluster.Masters {
				masters[i] = &master{keys: keysOn(t, client, m.Addr, fmt.Sprintf("m%d", i), 100)}
			}
			var faulty atomic.Bool
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i, m := range masters {
				for w := range 8 {
					wg.Go(func() {
						for n := w; ; n += 8 {
							select {
							case <-stop:
								return
							default:
							}
							ctx, cancel := context.Background(), context.CancelFunc(func() {})
							if i == 0 { // the victim's requests give up
								ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
							}
							_, err := s.Allow(ctx, m.keys[n%len(m.keys)], 1, set)
							cancel()
							m.requests.Add(1)
							if faulty.Load() {
								m.during.Add(1)
							}
							if err != nil && m.failed.Add(1) == 1 {
								m.firstErr.Store(err)
							}
						}
					})
				}
			}
			time.Sleep(time.Second)
			faulty.Store(true)
			if fault == "killed" {
				victim.Kill()
			} else {
				victim.Pause()
			}
			time.Sleep(1500 * time.Millisecond)
			faulty.Store(false)
			if fault == "paused" {
				victim.Resume()
			}
			time.Sleep(500 * time.Millisecond)
			close(stop)
			wg.Wait()

			for i, m := range masters {
				t.Logf("master %d: %d requests, %d while the first was %s, %d failed", i, m.requests.Load(), m.during.Load(), fault, m.failed.Load())
			}
			t.Logf("%d runs alone, %d pipelines of %d runs", counter.alone.Load(), counter.pipelines.Load(), counter.piped.Load())
			if masters[0].failed.Load() == 0 {
				t.Errorf("no request of the %s master failed: the fault did not happen", fault)
			}
			for i, m := range masters[1:] {
				if n := m.failed.Load(); n != 0 {
					t.Errorf("master %d: %d requests failed; the first: %v", i+1, n, m.firstErr.Load())
				}
				if m.during.Load() == 0 {
					t.Errorf("master %d: no request was decided while the first was %s", i+1, fault)
				}
			}
			if counter.pipelines.Load() == 0 {
				t.Error("no pipeline was sent: nothing was batched")
			}
		})
	}
}
