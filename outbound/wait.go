package outbound

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/wait"
)

// waitFor blocks until s admits a request costing cost for key under limits,
// and returns that decision: what a request to an upstream does before it
// is sent. Each time the store
// denies, it sleeps for the decision's RetryAfter (exact for every
// algorithm: the time until cost fits, if nobody else spends meanwhile)
// and asks again.
//
// It never sleeps past ctx's deadline, nor longer than maxWait in all
// (zero means no bound but ctx's): when the next chance lies beyond
// either, it returns at once with the denial and an error wrapping
// context.DeadlineExceeded. When ctx ends while it sleeps, it returns
// the denial and ctx's error. Errors of the store are returned as they
// are, among them invalid input wrapping ratelimit.ErrInvalid, before anything is
// counted.
//
// Limits with a ban count every denial it meets
// towards it, as they would a client's; a ban's RetryAfter is its end. A
// decision that holds a slot of a ratelimit.Concurrent limit (Decision.Slot) is
// the caller's to end with ratelimit.Store.End when its work is done.
func waitFor(ctx context.Context, s ratelimit.Store, key string, cost int, limits *ratelimit.Limits, maxWait time.Duration) (ratelimit.Decision, error) {
	if maxWait < 0 {
		return ratelimit.Decision{}, fmt.Errorf("%w: outbound: the longest wait is negative: %v", ratelimit.ErrInvalid, maxWait)
	}
	var end time.Time
	if maxWait > 0 {
		end = waitNow().Add(maxWait)
	}
	if dl, ok := ctx.Deadline(); ok && (end.IsZero() || dl.Before(end)) {
		end = dl
	}
	for {
		d, err := s.Allow(ctx, key, cost, limits)
		if err != nil || d.Allowed {
			return d, err
		}
		retry := max(d.RetryAfter, time.Millisecond) // a denial always has one; never spin
		if !end.IsZero() && waitNow().Add(retry).After(end) {
			return d, fmt.Errorf("outbound: the request could pass in %v, after the deadline or the longest wait: %w", retry, context.DeadlineExceeded)
		}
		if err := waitSleep(ctx, retry); err != nil {
			return d, err
		}
	}
}

// waitNow and waitSleep are waitFor's clock, replaced in tests.
var (
	waitNow   = time.Now
	waitSleep = wait.For
)
