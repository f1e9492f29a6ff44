package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

func ExampleLimit() {
	limits := []ratelimit.Limit{
		ratelimit.PerMinute(100),
		ratelimit.PerMinute(5).Using(ratelimit.SlidingLog).Named("login"),
		ratelimit.PerSecond(10).Using(ratelimit.TokenBucket).WithBurst(50),
		ratelimit.PerDay(10_000).Using(ratelimit.FixedWindow),
	}
	for _, l := range limits {
		fmt.Println(l)
	}
	// Output:
	// 100 per 1m, sliding-window
	// login: 5 per 1m, sliding-log
	// 10 per 1s, token-bucket, burst 50
	// 10000 per 24h, fixed-window
}

func ExampleLimit_Validate() {
	err := ratelimit.PerMinute(200_000).Using(ratelimit.SlidingLog).Validate()
	fmt.Println(err)
	// Output:
	// ratelimit: invalid input: Limit.Quota must be at most 100000 for sliding-log, got 200000: the log keeps one entry per request; use sliding-window (SlidingWindow), which needs a few counters per key (200000 per 1m, sliding-log)
}

func ExampleDecision_DeniedBy() {
	// A decision as a store returns it for a request with two limits.
	d := ratelimit.Decision{Results: []ratelimit.Result{
		{Limit: ratelimit.PerSecond(10), Allowed: true, Remaining: 3},
		{Limit: ratelimit.PerHour(500), Allowed: false, RetryAfter: 42 * time.Second},
	}}
	if r, denied := d.DeniedBy(); denied {
		fmt.Printf("denied by %v; retry in %v\n", r.Limit, d.RetryAfter())
	}
	// Output:
	// denied by 500 per 1h, sliding-window; retry in 42s
}
