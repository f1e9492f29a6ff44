package ratelimit

import "time"

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
	// Remaining more units, whatever the key sends; after it, more may
	// pass. It is the time until a unit beyond Remaining comes back: the
	// end of a fixed window, the oldest entry or slot leaving a sliding
	// log or window, the next token of a bucket (a full Window or one
	// token's time when nothing is spent). It is never later than the
	// truth, so a promise made of it holds; it is at most RetryAfter when
	// denied, and for a banned key at most the time until the ban ends.
	Window time.Duration

	// ResetAfter is the time until the limit is fully replenished
	// (Remaining back to Capacity) if the key makes no more requests.
	ResetAfter time.Duration

	// RetryAfter is, for a denied request, the time until a request of the
	// same cost would pass this limit if the key makes no other request.
	// It is zero when Allowed.
	RetryAfter time.Duration
}

// Decision is a store's answer to one request checked against one or more
// limits, all or nothing: when Allowed, the cost was taken from every
// limit; when not, from none. [Store.Peek] answers with a Decision too,
// and takes nothing either way. It is a plain value; the zero Decision
// allowed nothing and holds no results. A store outside this package
// makes one with [MakeDecision].
type Decision struct {
	// Allowed reports whether every limit admitted the request.
	Allowed bool

	// Fallback reports that an in-process fallback decided, because the
	// shared store was unavailable (see the package store's Fallback): the
	// limits held per instance only.
	Fallback bool

	// Banned is, when the key is banned (see [Ban]), the time until the
	// ban ends; zero otherwise. A banned key is denied: every Result has
	// Allowed false, Remaining 0, and RetryAfter and ResetAfter at least
	// Banned. The request whose denial starts a ban sees it too.
	Banned time.Duration

	// The results, n of them: in one when there is one, so that the
	// common decision, by one limit, allocates nothing; in more when
	// there are several. One inline and not two: a Result is 96 bytes
	// on 64-bit machines, a Decision 144 with one and would be 240 with
	// two, and every Decision is copied through stores, Limiters and
	// Decisions; two limits pay one allocation, as every decision used
	// to.
	n    int
	one  [1]Result
	more []Result
}

// MakeDecision returns a Decision holding a copy of results, one per
// limit in the order the limits were given, and Allowed when every result
// allowed (false when there are none). It is how a [Store] outside this
// package answers; the store may then set Fallback and Banned. A decision
// by one limit allocates nothing.
func MakeDecision(results ...Result) Decision {
	d := Decision{Allowed: len(results) > 0, n: len(results)}
	if len(results) <= len(d.one) {
		copy(d.one[:], results)
	} else {
		d.more = append([]Result(nil), results...)
	}
	for _, r := range results {
		d.Allowed = d.Allowed && r.Allowed
	}
	return d
}

// Results returns d's results, one per limit, in the order the limits
// were given; nil for the zero Decision. The slice is d's own storage:
// changing a Result in it changes d. A copy of a Decision with one result
// holds its own; copies of one with several share them, as copies of a
// slice do. Call it on a variable or a slice element, such as
// ratelimit.Decisions(ctx)[0], not on a function's result: that is not
// addressable.
func (d *Decision) Results() []Result {
	switch {
	case d.n == 0:
		return nil
	case d.n > len(d.one):
		return d.more
	}
	return d.one[:d.n:d.n]
}

// DeniedBy returns the result of the limit that denied the request. When
// several denied it, it returns the one that lets the request through last
// (the longest RetryAfter). ok is false when the request was allowed.
func (d Decision) DeniedBy() (r Result, ok bool) {
	for _, x := range d.Results() {
		if !x.Allowed && (!ok || x.RetryAfter > r.RetryAfter) {
			r, ok = x, true
		}
	}
	return r, ok
}

// RetryAfter is the time until the same request would pass every limit,
// if the key makes no other request; zero when allowed.
func (d Decision) RetryAfter() time.Duration {
	r, _ := d.DeniedBy()
	return r.RetryAfter
}

// tighter reports whether x is closer to denying than r, so that headers
// describe x rather than r: a result that denies beats one that allows;
// of two that deny, the one that lets the request through last; of two
// that allow, the one with the fewest Remaining, ties going to the longest
// ResetAfter.
func tighter(x, r Result) bool {
	switch {
	case x.Allowed != r.Allowed:
		return !x.Allowed
	case !x.Allowed:
		return x.RetryAfter > r.RetryAfter
	}
	return x.Remaining < r.Remaining || (x.Remaining == r.Remaining && x.ResetAfter > r.ResetAfter)
}
