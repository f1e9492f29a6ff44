package ratelimit

import (
	"context"
	"fmt"
)

// MaxKeyLength is the longest key, in bytes, that [CheckRequest] accepts.
const MaxKeyLength = 1024

// Store decides requests against limits and keeps the counters. The
// package store holds a Redis implementation shared by every instance of
// a service. Implementations are safe for concurrent use.
type Store interface {
	// Allow decides one request costing cost units for key against limits,
	// atomically and all or nothing: when every limit admits it, cost is
	// taken from each; when any limit denies it, from none, and the
	// Decision says which (see [Decision.DeniedBy]).
	//
	// A denial is a Decision, not an error. The error is non-nil only for
	// input that can never work (wrapping [ErrInvalid], reported before the
	// backend is contacted; see [CheckRequest]) or when the backend fails.
	Allow(ctx context.Context, key string, cost int, limits ...Limit) (Decision, error)
}

// Resetter is implemented by stores that can forget a key's state for some
// limits, for example to clear failed login attempts after a success.
type Resetter interface {
	// Reset forgets key's state for limits, so its next request starts
	// afresh. It validates like Allow.
	Reset(ctx context.Context, key string, limits ...Limit) error
}

// CheckRequest reports why [Store.Allow] must refuse a request, as an
// error wrapping [ErrInvalid] that names the culprit, or nil. It rejects
// an empty or over-long key, a cost below 1 or above any limit's
// Capacity (such a request could never pass), no limits, an invalid
// limit, and two limits that would share state (same algorithm and
// window). Stores call it before touching their backend.
func CheckRequest(key string, cost int, limits []Limit) error {
	if key == "" {
		return fmt.Errorf("%w: key is empty", ErrInvalid)
	}
	if len(key) > MaxKeyLength {
		return fmt.Errorf("%w: key is %d bytes long; at most %d are allowed", ErrInvalid, len(key), MaxKeyLength)
	}
	if cost < 1 {
		return fmt.Errorf("%w: cost must be at least 1, got %d", ErrInvalid, cost)
	}
	if problem := checkLimitSet(limits); problem != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, problem)
	}
	for i, l := range limits {
		if c := l.Capacity(); cost > c {
			return fmt.Errorf("%w: cost %d exceeds the capacity %d of limits[%d] (%v), so the request could never pass", ErrInvalid, cost, c, i, l)
		}
	}
	return nil
}

// checkLimitSet describes what makes limits unusable together, or returns
// "".
func checkLimitSet(limits []Limit) string {
	if len(limits) == 0 {
		return "no limits given"
	}
	for i, l := range limits {
		if field, problem := l.check(); field != "" {
			return fmt.Sprintf("limits[%d].%s %s (%v)", i, field, problem, l)
		}
		for j := range i {
			if limits[j].state() == l.state() {
				return fmt.Sprintf("limits[%d] (%v) and limits[%d] (%v) would share one counter (same algorithm, window and scope); keep one", j, limits[j], i, l)
			}
		}
	}
	return ""
}

// state keeps the fields that identify a limit's stored state: two limits
// with equal states would count into the same place.
func (l Limit) state() Limit {
	l = l.WithDefaults()
	s := Limit{Algorithm: l.Algorithm, Window: l.Window, Scope: l.Scope}
	switch l.Algorithm {
	case SlidingWindow:
		s.Precision = l.Precision
	case TokenBucket:
		s.Quota = l.Quota
	}
	return s
}
