package store

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestResetBeatsDenyCache races a Reset with the denials of a burst, as a
// login that succeeds after failed attempts does: once Reset returns, no
// decision may be denied by a denial cached from before it. Each trial
// spends a limit of 5, sends 4 requests at once, resets the key as soon as
// one of them is denied, and then asks again: Redis holds at most 4
// requests after the reset, so the request must pass.
func TestResetBeatsDenyCache(t *testing.T) {
	srv := redistest.Shared(t)
	trials := 500 // the default run; the bug this guards against showed in a fifth of the trials
	switch {
	case testing.Short():
		trials = 200
	case os.Getenv(redistest.FaultsEnv) == "1":
		trials = 2000 // the long run
	}
	for _, wrapped := range []bool{false, true} {
		name := "Redis"
		if wrapped {
			name = "Fallback"
		}
		t.Run(name, func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { client.Close() })
			var s ratelimit.Store = newStore(t, client, RedisOptions{Prefix: uniquePrefix()})
			if wrapped {
				f, err := NewFallback(s.(*Redis), FallbackOptions{Budget: time.Second, Logger: quietLogger})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				s = f
			}
			ctx := context.Background()
			algorithms := []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket}
			// One set per algorithm, reused by every request and Reset, as
			// a Limiter does: the deny cache answers only for the set it
			// cached.
			sets := make([]*ratelimit.Limits, len(algorithms))
			for i, a := range algorithms {
				sets[i] = limitsOf(t, ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(a))
			}
			stale := 0
			for i := range trials {
				l := sets[i%len(sets)]
				key := fmt.Sprintf("login-%d", i)
				for range 5 {
					if d, err := s.Allow(ctx, key, 1, l); err != nil || !d.Allowed {
						t.Fatalf("trial %d: spending the limit: %+v, %v", i, d, err)
					}
				}
				deniedOnce := make(chan struct{})
				var once sync.Once
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						d, err := s.Allow(ctx, key, 1, l)
						if err != nil {
							t.Errorf("trial %d: %v", i, err)
						}
						if !d.Allowed {
							once.Do(func() { close(deniedOnce) })
						}
					})
				}
				select {
				case <-deniedOnce:
				case <-time.After(5 * time.Second):
					t.Fatalf("trial %d: no request of the burst was denied", i)
				}
				if err := s.Reset(ctx, key, l); err != nil {
					t.Fatalf("trial %d: Reset: %v", i, err)
				}
				wg.Wait()
				d, err := s.Allow(ctx, key, 1, l)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					stale++
				}
			}
			if stale > 0 {
				t.Errorf("%d of %d trials: a request after Reset returned was denied, by a denial cached from before it", stale, trials)
			}
		})
	}
}
