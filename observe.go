package ratelimit

import (
	"fmt"
	"net/http"
	"time"
)

// An Outcome is what became of a request a [Limiter] looked at: see
// [Event].
type Outcome uint8

// The outcomes of an [Event].
const (
	// Allowed: every limit let the request through.
	Allowed Outcome = iota + 1
	// Denied: a limit denied the request, which was answered 429 (or by
	// the deny handler of [WithDenyHandler]).
	Denied
	// Banned: the key is banned (see [Ban]), or this denial started a
	// ban; the request was denied.
	Banned
	// WouldDeny: in dry-run mode ([WithDryRun]), a request that would have
	// been denied (or banned); it was served.
	WouldDeny
	// StoreError: the store failed; the error handler answered.
	StoreError
	// Canceled: the request's context ended (the client left) before the
	// store decided.
	Canceled
	// BadRequest: the request could not be decided: its key is missing
	// ([ErrNoKey]) or its cost or limits are invalid ([ErrInvalid]).
	BadRequest
)

var outcomeNames = [...]string{
	Allowed:    "allowed",
	Denied:     "denied",
	Banned:     "banned",
	WouldDeny:  "would_deny",
	StoreError: "store_error",
	Canceled:   "canceled",
	BadRequest: "bad_request",
}

// String returns the outcome in lower snake case, as a metric label
// value: "allowed", "denied", "banned", "would_deny", "store_error",
// "canceled" or "bad_request".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	return "unknown"
}

// An Event tells an observer (see [WithObserver]) about one request a
// Limiter decided, or could not decide. Its fields are the Limiter's
// configuration, never the client's identity: the key is not in it, so
// that an observer cannot leak it into metric labels or logs by accident.
type Event struct {
	// Namespace is the Limiter's namespace (see [New]).
	Namespace string

	// Route is the pattern of the route table (see [WithRoutes]) whose
	// limits applied, or "" for the limits of [WithLimits] and
	// [WithLimitsFunc] outside any route.
	Route string

	// Outcome says what became of the request.
	Outcome Outcome

	// Cost is the units the request asked for (see [WithCost]); 0 for a
	// BadRequest whose cost was never read.
	Cost int

	// Latency is how long the store took to decide, or to fail: the
	// call's wall time. Zero when the store was not asked (BadRequest
	// before the call).
	Latency time.Duration

	// Decision is the store's decision for Allowed, Denied, Banned and
	// WouldDeny: its Results name each limit (Result.Limit.Name, the
	// policy's name in the headers) and say which denied, and its
	// Fallback field whether an in-process fallback decided. The zero
	// Decision for the other outcomes.
	Decision Decision

	// Err is why the request was not decided, for StoreError, Canceled
	// and BadRequest; nil otherwise. It may hold the key (a Redis error
	// naming it): do not put it in metric labels.
	Err error
}

// WithObserver calls observe for every request the Limiter decides or
// fails to decide, after the store answered and before the response is
// written, on the request's goroutine: a request the limits do not apply
// to, or that [WithSkip] skips, is not observed. observe must be safe
// for concurrent use and quick; it must not keep the Event's Decision
// results beyond the call, nor write to the response. Given several times,
// the observers are called in order. A Limiter without one measures
// nothing; with one, it reads the clock twice per request, and
// allocates nothing more.
func WithObserver(observe func(r *http.Request, e Event)) Option {
	return func(l *Limiter) error {
		if observe == nil {
			return fmt.Errorf("%w: WithObserver: the observer is nil", ErrInvalid)
		}
		if prev := l.observe; prev != nil {
			l.observe = func(r *http.Request, e Event) { prev(r, e); observe(r, e) }
		} else {
			l.observe = observe
		}
		return nil
	}
}

// outcomeOf returns the outcome of a decision d the store made.
func (l *Limiter) outcomeOf(d *Decision) Outcome {
	switch {
	case d.Allowed:
		return Allowed
	case l.dryRun:
		return WouldDeny
	case d.Banned > 0:
		return Banned
	}
	return Denied
}

// observeFailure tells the observer, if any, that r was not decided.
func (l *Limiter) observeFailure(r *http.Request, o Outcome, err error, e Event) {
	if l.observe != nil {
		e.Namespace, e.Outcome, e.Err = l.namespace, o, err
		l.observe(r, e)
	}
}
