package store

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/fallback"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestLostAnswersCountedOnce loses 5% of Redis's answers to the store's
// programs at random, after Redis ran them, under concurrent load on a real
// redis-server: through the Redis store alone, and through a Fallback,
// where each lost answer is an outage, so that backlogs form, are brought
// to Redis, and the answers to those charges are lost too. It runs until
// enough admissions were made and, through the Fallback, enough answers to
// charges were lost. Redis must count each admission once: alone, at least
// the calls answered and at most the calls made; through the Fallback, at
// least the admissions and at most one more per request under way per
// outage (workers × outages), the bound docs/production.md states. The
// Fallback's outages, which repeat a cause within the run, are logged
// once per cause. With RATELIMIT_FAULTS=1 it runs ten times longer.
func TestLostAnswersCountedOnce(t *testing.T) {
	run := struct {
		workers       int
		admissions    int64 // at least
		lostCharges   int64 // at least, through the Fallback
		within        time.Duration
		fraction      float64
		probeInterval time.Duration
		keys          []string
		quota         int
	}{4, 2_000, 2, 30 * time.Second, 0.05, 20 * time.Millisecond, []string{"a", "b", "c", "d"}, 1 << 40}
	if os.Getenv(redistest.FaultsEnv) == "1" {
		run.workers, run.admissions, run.lostCharges, run.within = 8, 20_000, 20, 5*time.Minute
	}
	limits := limitsOf(t, ratelimit.Limit{Name: "n", Quota: run.quota, Window: time.Hour})
	single := func(t *testing.T, dial func(context.Context, string, string) (net.Conn, error)) RedisClient {
		c := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr, Dialer: dial, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	clustered := func(t *testing.T, dial func(context.Context, string, string) (net.Conn, error)) RedisClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.SharedCluster(t).Addrs(), Dialer: dial, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, tt := range []struct {
		name     string
		client   func(*testing.T, func(context.Context, string, string) (net.Conn, error)) RedisClient
		fallback bool
	}{
		{"Redis alone", single, false},
		{"through the Fallback", single, true},
		{"through the Fallback, on a cluster", clustered, true}, // charges in a pipeline per master
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := &loser{}
			client := tt.client(t, l.dial)
			prefix := fmt.Sprintf("lost%d:", time.Now().UnixNano())
			var s ratelimit.Store = newStore(t, client, RedisOptions{Prefix: prefix, Logger: quietLogger})
			var f *Fallback
			var logs syncBuffer
			if tt.fallback {
				var err error
				// A long budget: answers are lost here, and a loaded
				// machine must not add outages of its own.
				f, err = NewFallback(s.(*Redis), FallbackOptions{Budget: time.Second, ProbeInterval: run.probeInterval, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				s = f
			}
			l.fraction.Store(math.Float64bits(run.fraction))

			ctx := context.Background()
			calls := make([]atomic.Int64, len(run.keys))
			answered := make([]atomic.Int64, len(run.keys))
			admitted := make([]atomic.Int64, len(run.keys))
			var total atomic.Int64
			var done atomic.Bool
			deadline := time.Now().Add(run.within)
			enough := func() bool {
				return total.Load() >= run.admissions && l.lost.Load() > 0 && (!tt.fallback || l.charges.Load() >= run.lostCharges)
			}
			var wg sync.WaitGroup
			for w := range run.workers {
				wg.Go(func() {
					for i := w; !done.Load(); i++ {
						k := i % len(run.keys)
						d, err := s.Allow(ctx, run.keys[k], 1, limits)
						calls[k].Add(1)
						if err == nil {
							answered[k].Add(1)
						}
						if err == nil && d.Allowed {
							admitted[k].Add(1)
							total.Add(1)
						}
						if enough() || time.Now().After(deadline) {
							done.Store(true)
						}
					}
				})
			}
			wg.Wait()
			l.fraction.Store(0)
			if !enough() {
				t.Fatalf("after %v: %d admitted, %d answers lost, %d of them to charges; want at least %d, 1 and %d", run.within, total.Load(), l.lost.Load(), l.charges.Load(), run.admissions, run.lostCharges)
			}
			var outages uint64
			if tt.fallback {
				waitFor(t, "the Fallback to bring every backlog to Redis", func() bool {
					h := f.Health()
					return h.Decisions == "redis" && h.Waiting == 0
				})
				outages = f.Health().Outages
			}

			// Redis's count, read through a client that loses nothing.
			plain := tt.client(t, nil)
			reader := newStore(t, plain, RedisOptions{Prefix: prefix})
			var counted, madeCalls, answers int64
			for k, key := range run.keys {
				d, err := reader.Peek(ctx, key, 1, limits)
				if err != nil {
					t.Fatalf("Peek(%s): %v", key, err)
				}
				counted += int64(run.quota - d.Results()[0].Remaining)
				madeCalls += calls[k].Load()
				answers += answered[k].Load()
			}
			t.Logf("%d calls, %d answered, %d admitted; %d answers lost, %d of them to charges; %d outages; Redis counts %d",
				madeCalls, answers, total.Load(), l.lost.Load(), l.charges.Load(), outages, counted)
			if !tt.fallback {
				if counted < answers || counted > madeCalls {
					t.Errorf("Redis counts %d, want at least the %d calls answered and at most the %d made", counted, answers, madeCalls)
				}
				return
			}
			if bound := total.Load() + int64(run.workers)*int64(outages); counted < total.Load() || counted > bound {
				t.Errorf("Redis counts %d for %d admitted, want at least those and at most %d (one more per request under way, %d, per outage, %d)",
					counted, total.Load(), bound, run.workers, outages)
			}

			// The outages repeat a few causes, in less than a minute: one
			// line each, and no more ends of outages than outages logged.
			causes := map[string]int{}
			var ends int
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "Redis unavailable") {
					_, cause, _ := strings.Cut(line, "cause=")
					cause, _, _ = strings.Cut(cause, " error=")
					causes[cause]++
				}
				if strings.Contains(line, "Redis answers again") {
					ends++
				}
			}
			t.Logf("%d outages logged as %v, %d ends", len(causes), causes, ends)
			for cause, n := range causes {
				if n > 1 {
					t.Errorf("cause %s logged %d times in less than a minute, want once:\n%s", cause, n, logs.String())
				}
			}
			if ends > len(causes) {
				t.Errorf("%d ends of outages logged, for %d outages logged", ends, len(causes))
			}
		})
	}
}

// TestChargeSentAgainCountsOnce brings one backlog, for a limit of each
// algorithm, to Redis, then the same charge again, as the Fallback does
// when the answer was lost, then another charge: the second run must
// change nothing, the third count again. The charge's identity must be
// kept, in the key's hash tag, as long as its longest limit's horizon.
func TestChargeSentAgainCountsOnce(t *testing.T) {
	ctx := context.Background()
	var limits []ratelimit.Limit
	for _, l := range oneOfEach {
		l.Quota = 100
		if l.Window != 0 {
			l.Window = time.Hour // a token bucket refills nothing in the test's second
		}
		limits = append(limits, l)
	}
	given := limitsOf(t, limits...)
	set := limitset.Compile(given)
	eachBackend(t, func(t *testing.T, client *redis.Client) {
		s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache})
		now, err := client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		at := now.Add(-time.Second).UnixMicro()
		charge := func(id string) *fallback.Charge {
			at++ // a sliding log's members differ on a pinned clock too
			c := &fallback.Charge{Key: "k", ID: id}
			for i := range set.Limits {
				c.Limits = append(c.Limits, fallback.ChargedLimit{Limit: &set.Limits[i], Spent: []fallback.Spending{{At: at, Cost: 2}}})
			}
			return c
		}
		for _, step := range []struct {
			name string
			id   string
			used int
		}{
			{"the first charge", "a1", 2},
			{"the same charge again", "a1", 2},
			{"another charge", "b2", 4},
		} {
			c := charge(step.id)
			if (primary{s}).Charge(ctx, []*fallback.Charge{c}, 0); c.Err != nil {
				t.Fatalf("%s: Charge: %v", step.name, c.Err)
			}
			d, err := s.Peek(ctx, "k", 1, given)
			if err != nil {
				t.Fatalf("%s: Peek: %v", step.name, err)
			}
			for _, r := range d.Results() {
				if got := 100 - r.Remaining; got != step.used {
					t.Errorf("after %s: %v: got %d used, want %d", step.name, r.Limit, got, step.used)
				}
			}
		}
		longest := time.Duration(charge("").Horizon()) * time.Microsecond // the monthly one
		for _, id := range []string{"a1", "b2"} {
			key := redisKey(s.prefix, "k", spec.ChargeSuffix+id)
			if ttl := client.PTTL(ctx, key).Val(); ttl > longest || ttl < longest-time.Minute {
				t.Errorf("%s: TTL %v, want the longest horizon, %v", key, ttl, longest)
			}
		}
	})
}
