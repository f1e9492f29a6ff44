package ratelimit

import "context"

// Store decides requests against limits and keeps the counters: Allow
// decides, Peek says what Allow would decide without deciding, and Reset
// forgets. The package store holds a Redis store shared by every instance
// of a service, an in-process Memory store, and a Fallback that decides in
// process while Redis fails. Implementations are safe for concurrent use;
// one outside this package answers with [MakeDecision].
type Store interface {
	// Allow decides one request costing cost units for key against limits,
	// atomically and all or nothing: when every limit admits it, cost is
	// taken from each; when any limit denies it, from none, and the
	// Decision says which (see [Decision.DeniedBy]).
	//
	// Keys are what a Limiter builds: its namespace, the route, and the
	// client's key, at most a few hundred bytes. A denial is a Decision,
	// not an error. The error wraps [ErrInvalid], before the backend is
	// contacted, for an empty key, a key over 1024 bytes, nil limits, or a
	// cost below 1 or above a limit's capacity (such a request could never
	// pass); otherwise it is non-nil only when the backend fails.
	Allow(ctx context.Context, key string, cost int, limits *Limits) (Decision, error)

	// Peek answers what Allow would answer now for a request costing
	// cost, without taking anything or changing any state: Allowed
	// reports whether cost fits under every limit; each Result's
	// Remaining is the units the key may spend now (nothing taken),
	// ResetAfter the time until the limit is full, RetryAfter zero when
	// cost fits under that limit, else the time until it would (if the
	// key makes no request meanwhile). It validates like Allow.
	//
	// A key the store holds nothing for has every limit's capacity left.
	// Peek suits showing a client what it has left; deciding whether to
	// serve is Allow's job, since another request may spend the units
	// between a Peek and an Allow.
	Peek(ctx context.Context, key string, cost int, limits *Limits) (Decision, error)

	// Reset forgets key's state under limits, so that its next request
	// starts afresh, for example to clear failed logins after a success.
	Reset(ctx context.Context, key string, limits *Limits) error
}
