package outbound

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/wait"
)

// waitFor asks s to admit cost for key under limits until it does,
// sleeping each denial's RetryAfter (exact: the time until cost fits), and
// returns that decision. It never sleeps past ctx's deadline nor maxWait
// in all (0: no bound but ctx's): when the next chance lies beyond, it
// returns the denial and an error wrapping context.DeadlineExceeded; when
// ctx ends while it sleeps, the denial and ctx's error. Store errors are
// returned as they are. Each denial counts towards a ban; a decision's
// Slot is the caller's to End.
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
