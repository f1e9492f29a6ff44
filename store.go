package ratelimit

import (
	"context"
	"time"
)

// Store decides requests against limits and keeps the counters: Allow
// decides, End charges what a request used once it is done, Peek says
// what Allow would decide without deciding, and Reset forgets. The
// package store holds a Redis store shared by every instance of a
// service, an in-process Memory store, and a Fallback that decides in
// process while Redis fails. Implementations are safe for concurrent use;
// one outside this package answers with [MakeDecision].
type Store interface {
	// Allow decides one request costing cost units for key against limits,
	// atomically and all or nothing: when every limit admits it, cost is
	// taken from each; when any limit denies it, from none, and the
	// Decision's results say which.
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

	// End ends a request that Allow admitted as d, once its response is
	// done: it gives back the slot d holds of a [Concurrent] limit and the
	// cost d reserved in each of limits' limits charged from usage (see
	// Decision.Slot), and takes usage units (0 or more) from each of them
	// ([Limit].Usage), whatever they have left, atomically, and leaves the
	// other limits alone. An End of d that comes again takes nothing. It answers
	// for each limit as Peek would for a request of 1: what the key has
	// left now. It validates like Reset, and refuses a negative usage.
	End(ctx context.Context, key string, usage int, limits *Limits, d Decision) (Decision, error)
}

// Result is one limit's answer to one request: a plain value. The zero
// Result is a denial by the zero Limit and means nothing.
type Result struct {
	// Limit is the limit this result is for. Through a [Limiter] its Name
	// is the policy's name in the headers, made up when the limit had none
	// (see [Limit].Name).
	Limit Limit

	// Allowed reports whether this limit alone admits the request. When a
	// request has several limits it passes only if all allow it.
	Allowed bool

	// Remaining is how many units the key may still spend right now, after
	// this decision: from 0 to the limit's capacity (Quota, or a token
	// bucket's Burst). From [Store.Peek], which takes nothing, it is what
	// the key may spend now.
	Remaining int

	// Window is the effective window of the draft's RateLimit field (its
	// t): within Window from the decision, this limit admits at most
	// Remaining more units, whatever the key sends. It is never later than
	// the truth, and at most RetryAfter when denied (see docs/headers.md).
	Window time.Duration

	// ResetAfter is the time until the limit is fully replenished
	// (Remaining back to capacity) if the key makes no more requests.
	ResetAfter time.Duration

	// RetryAfter is, for a denied request, the time until a request of the
	// same cost would pass this limit if the key makes no other request.
	// It is zero when Allowed.
	RetryAfter time.Duration

	// Leased is, for a [Limit] Leased, the units this decision took from
	// the store for the instance's slice of the limit, beyond the
	// request's cost: more than 0 when the request went to the store and
	// refilled the slice, 0 when it was decided from the slice in process.
	// An observer counts refills with it.
	Leased int
}

// Decision is a store's answer to one request checked against one or more
// limits, all or nothing: when Allowed, the cost was taken from every
// limit; when not, from none. [Store.Peek] answers with a Decision too,
// and takes nothing either way. It is a plain value: copy it, keep it,
// read it from any variable or function result. The zero Decision allowed
// nothing and holds no results. A store makes one with [MakeDecision].
type Decision struct {
	// Allowed reports whether every limit admitted the request.
	Allowed bool

	// RetryAfter is, when denied, the time until the same request would
	// pass every limit if the key makes no other request: the longest
	// RetryAfter of the results. Zero when allowed.
	RetryAfter time.Duration

	// Fallback reports that an in-process fallback decided, because the
	// shared store was unavailable (see the package store's Fallback): the
	// limits held per instance only.
	Fallback bool

	// Banned is, when the key is banned (see [Ban]), the time until the
	// ban ends; zero otherwise. A banned key is denied: every Result has
	// Allowed false, Remaining 0, and RetryAfter and ResetAfter at least
	// Banned. The request whose denial starts a ban sees it too.
	Banned time.Duration

	// Slot names what a request admitted holds until [Store.End] gives it
	// back: its slot of a [Concurrent] limit, its cost reserved in the
	// limits charged from usage ([Limit].Usage); empty when it holds
	// nothing. The store that made the Decision sets it, and renews what
	// it names until End.
	Slot string

	// The results, n of them: in one when there is one, in more when
	// there are several. The common decision, by one limit, so allocates
	// nothing, which keeps a request on the Memory store at two
	// allocations (middleware_bench_test.go's BenchmarkMiddlewareMemory).
	n    int
	one  [1]Result
	more []Result
}

// MakeDecision returns a Decision holding a copy of results, one per
// limit in the order the limits were given, Allowed when every result
// allowed (false when there are none), and the longest RetryAfter of the
// results. It is how a [Store] answers; the store may then set Fallback
// and Banned. A decision by one limit allocates nothing.
func MakeDecision(results ...Result) Decision {
	d := Decision{Allowed: len(results) > 0, n: len(results)}
	if len(results) <= len(d.one) {
		copy(d.one[:], results)
	} else {
		d.more = append([]Result(nil), results...)
	}
	for _, r := range results {
		d.Allowed = d.Allowed && r.Allowed
		d.RetryAfter = max(d.RetryAfter, r.RetryAfter)
	}
	return d
}

// Results returns d's results, one per limit, in the order the limits
// were given; nil for the zero Decision. Copies of a Decision with
// several results share them, as copies of a slice do: treat them as
// read-only.
func (d Decision) Results() []Result { return d.results() }

// results is Results without copying d.
func (d *Decision) results() []Result {
	switch {
	case d.n == 0:
		return nil
	case d.n > len(d.one):
		return d.more
	}
	return d.one[:d.n:d.n]
}
