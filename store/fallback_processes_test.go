package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// A Fallback never fails a request because Redis is away: four processes,
// each a service instance with its Fallback, keep deciding a hot key
// under leased limits (where requests wait for another request's slices)
// and other keys under plain limits, one of them charged from usage,
// while Redis is stopped (SIGSTOP) and later killed and started again.
// Every call must be answered, none with an error.

// outageEnv, when set, makes the test binary an instance of
// TestFaultFallbackProcesses (see runOutageInstance), configured by its
// value, an outageInstance in JSON.
const outageEnv = "RATELIMIT_TEST_OUTAGE_INSTANCE"

// outageInstance is what an instance does.
type outageInstance struct {
	Addr    string
	Prefix  string
	Callers int
	Start   int64 // unix µs: when to start
	Stop    int64 // unix µs: when to stop
}

// outageReport is what an instance prints when it is done.
type outageReport struct {
	Calls, Allowed, InProcess, Errors int64
	Outages                           uint64
	FirstError                        string
}

// outageSets are the limits of an instance: leased on the hot key, plain
// on each caller's key, where a usage limit is charged at the end.
func outageSets() (leased, plain *ratelimit.Limits, err error) {
	leased, err = ratelimit.NewLimits(
		ratelimit.Limit{Quota: 1_000_000, Window: time.Second, Leased: true}.Using(ratelimit.FixedWindow),
		ratelimit.Limit{Quota: 10_000_000, Window: 10 * time.Second, Precision: time.Second, Leased: true},
	)
	if err != nil {
		return nil, nil, err
	}
	plain, err = ratelimit.NewLimits(
		ratelimit.PerSecond(100_000),
		ratelimit.Limit{Quota: 100_000, Window: time.Second, Usage: true}.Using(ratelimit.TokenBucket),
	)
	return leased, plain, err
}

// runOutageInstance is an instance's whole life: its callers ask until
// Stop, then it prints its outageReport.
func runOutageInstance() {
	redis.SetLogger(&goRedisLog) // quiet: the failed dials are expected
	var cfg outageInstance
	if err := json.Unmarshal([]byte(os.Getenv(outageEnv)), &cfg); err != nil {
		panic(err)
	}
	client := redis.NewClient(&redis.Options{Addr: cfg.Addr, PoolSize: 4 * cfg.Callers, ContextTimeoutEnabled: true})
	r, err := NewRedis(client, RedisOptions{Prefix: cfg.Prefix})
	if err != nil {
		panic(err)
	}
	// The defaults but for the probe interval and the log: a budget of
	// 50ms, which a loaded machine overruns at times, as production does.
	f, err := NewFallback(r, FallbackOptions{Instances: 4, ProbeInterval: faultInterval, Logger: quietLogger})
	if err != nil {
		panic(err)
	}
	leased, plain, err := outageSets()
	if err != nil {
		panic(err)
	}
	for unixMicro() < cfg.Start {
		time.Sleep(time.Millisecond)
	}
	var (
		rep     outageReport
		mu      sync.Mutex
		errOnce sync.Once
		wg      sync.WaitGroup
	)
	ctx := context.Background()
	for g := range cfg.Callers {
		wg.Go(func() {
			var calls, allowed, local, failed int64
			note := func(d ratelimit.Decision, err error) {
				calls++
				switch {
				case err != nil:
					failed++
					errOnce.Do(func() { rep.FirstError = err.Error() })
				case d.Allowed:
					allowed++
				}
				if err == nil && d.Fallback {
					local++
				}
			}
			mine := fmt.Sprint("caller-", g)
			for i := 0; unixMicro() < cfg.Stop; i++ {
				time.Sleep(100 * time.Microsecond) // requests arrive, not a busy loop
				if i%4 != 3 {                      // most requests on the hot key
					note(f.Allow(ctx, "hot", 1, leased))
					continue
				}
				d, err := f.Allow(ctx, mine, 1, plain)
				note(d, err)
				if err == nil && d.Allowed {
					note(f.End(ctx, mine, 2, plain, d))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			rep.Calls += calls
			rep.Allowed += allowed
			rep.InProcess += local
			rep.Errors += failed
		})
	}
	wg.Wait()
	rep.Outages = f.Health().Outages
	f.Close()
	json.NewEncoder(os.Stdout).Encode(rep)
}

// TestFaultFallbackProcesses: four instance processes of eight callers
// each decide through their Fallbacks while Redis is stopped for 2s, then
// killed and started again a second later, empty: every call is
// answered, none with an error, and each instance decided in process.
func TestFaultFallbackProcesses(t *testing.T) {
	redistest.RequireFaults(t)
	srv := redistest.Require(t)
	const instances = 4
	start := time.Now().Add(time.Second) // the processes' start, well before
	stop := start.Add(7 * time.Second)
	reports := make([]outageReport, instances)
	var wg sync.WaitGroup
	for i := range instances {
		wait := startInstance(t, outageEnv, outageInstance{Addr: srv.Addr, Prefix: "rl-processes:", Callers: 8, Start: start.UnixMicro(), Stop: stop.UnixMicro()}, &reports[i])
		wg.Go(func() {
			if err := wait(); err != nil {
				t.Errorf("instance %d: %v", i, err)
			}
		})
	}
	time.Sleep(time.Until(start.Add(time.Second)))
	srv.Pause()
	time.Sleep(2 * time.Second)
	srv.Resume()
	time.Sleep(1500 * time.Millisecond)
	srv.Kill()
	time.Sleep(time.Second)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var sum outageReport
	for i, r := range reports {
		t.Logf("instance %d: %d calls, %d allowed, %d decided in process, %d outages, %d errors", i, r.Calls, r.Allowed, r.InProcess, r.Outages, r.Errors)
		if r.Errors > 0 {
			t.Errorf("instance %d: %d calls of %d failed; the first: %s", i, r.Errors, r.Calls, r.FirstError)
		}
		if r.InProcess == 0 || r.Outages == 0 {
			t.Errorf("instance %d decided %d calls in process in %d outages: Redis's faults did not reach it", i, r.InProcess, r.Outages)
		}
		if r.Allowed == 0 {
			t.Errorf("instance %d admitted nothing", i)
		}
		sum.Calls += r.Calls
		sum.Errors += r.Errors
	}
	t.Logf("in all: %d calls, %d errors", sum.Calls, sum.Errors)
}
