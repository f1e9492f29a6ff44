package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Wait blocks until s admits a request costing cost for key under limits,
// and returns that decision: for callers that are not HTTP handlers, such
// as a job calling a third-party API under its quota. Each time the store
// denies, Wait sleeps for the decision's RetryAfter (exact for every
// algorithm: the time until cost fits, if nobody else spends meanwhile)
// and asks again.
//
// It never sleeps past ctx's deadline, nor longer than maxWait in all
// (zero means no bound but ctx's): when the next chance lies beyond
// either, it returns at once with the denial and an error wrapping
// [context.DeadlineExceeded]. When ctx ends while it sleeps, it returns
// the denial and ctx's error. Errors of the store are returned as they
// are, among them invalid input wrapping [ErrInvalid], before anything is
// counted.
//
// Limits with a ban (see [Limits.WithBan]) count every denial Wait meets
// towards it, as they would a client's; a ban's RetryAfter is its end.
func Wait(ctx context.Context, s Store, key string, cost int, limits *Limits, maxWait time.Duration) (Decision, error) {
	if maxWait < 0 {
		return Decision{}, fmt.Errorf("%w: Wait: maxWait is negative: %v", ErrInvalid, maxWait)
	}
	var end time.Time
	if maxWait > 0 {
		end = now().Add(maxWait)
	}
	if dl, ok := ctx.Deadline(); ok && (end.IsZero() || dl.Before(end)) {
		end = dl
	}
	for {
		d, err := s.Allow(ctx, key, cost, limits)
		if err != nil || d.Allowed {
			return d, err
		}
		retry := max(d.RetryAfter(), time.Millisecond) // a denial always has one; never spin
		if !end.IsZero() && now().Add(retry).After(end) {
			return d, fmt.Errorf("ratelimit: Wait: the request could pass in %v, after the deadline or the longest wait: %w", retry, context.DeadlineExceeded)
		}
		if err := sleep(ctx, retry); err != nil {
			return d, err
		}
	}
}

// now and sleep are Wait's clock, replaced in tests.
var (
	now   = time.Now
	sleep = func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
)
