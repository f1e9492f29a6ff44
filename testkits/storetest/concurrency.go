package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// testConcurrency has 200 goroutines, spread over 4 stores sharing one
// backend, race for one key with a quota of 100. The windows are a day
// long, so no unit comes back during the test: every algorithm must admit
// exactly 100. With all four limits on one request, exactly the smallest
// quota passes and every limit has given exactly that many.
func testConcurrency(t *testing.T, h Harness) {
	const goroutines, perGoroutine, quota = 200, 3, 100
	day := 24 * time.Hour
	race := func(t *testing.T, key string, limits ...ratelimit.Limit) (int, ratelimit.Store) {
		stores, _ := h.New(t, 4)
		set := limitsOf(t, limits...)
		var passed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range goroutines {
			s := stores[g%len(stores)]
			wg.Go(func() {
				<-start
				for range perGoroutine {
					d, err := s.Allow(context.Background(), key, 1, set)
					if err != nil {
						t.Errorf("Allow: %v", err)
						return
					}
					if msg := brokenInvariant(d, 1, limits); msg != "" {
						t.Errorf("Allow = %+v: %s", d, msg)
					}
					if d.Allowed {
						passed.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		return int(passed.Load()), stores[0]
	}

	for _, l := range []ratelimit.Limit{
		ratelimit.Limit{Quota: quota, Window: day}.Using(ratelimit.FixedWindow),
		ratelimit.Limit{Quota: quota, Window: day}.Using(ratelimit.SlidingLog),
		ratelimit.Limit{Quota: quota, Window: day},
		ratelimit.Limit{Quota: quota, Window: day}.Using(ratelimit.TokenBucket),
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			t.Parallel()
			if got, _ := race(t, uniqueKey(t, "k"), l); got != quota {
				t.Errorf("%d of %d concurrent requests passed %v, want exactly %d", got, goroutines*perGoroutine, l, quota)
			}
		})
	}

	t.Run("all four", func(t *testing.T) {
		t.Parallel()
		limits := []ratelimit.Limit{
			ratelimit.Limit{Quota: 100, Window: day}.Using(ratelimit.FixedWindow),
			ratelimit.Limit{Quota: 150, Window: day}.Using(ratelimit.SlidingLog),
			ratelimit.Limit{Quota: 120, Window: day},
			ratelimit.Limit{Quota: 80, Window: day}.Using(ratelimit.TokenBucket),
		}
		key := uniqueKey(t, "k")
		got, s := race(t, key, limits...)
		if got != 80 {
			t.Fatalf("%d concurrent requests passed, want exactly 80 (the token bucket's burst)", got)
		}
		d := allow(t, s, key, 1, limits...)
		for i, want := range []int{20, 70, 40, 0} {
			if r := d.Results()[i]; r.Remaining != want {
				t.Errorf("after the race, %v has %d remaining, want %d", r.Limit, r.Remaining, want)
			}
		}
	})
}
