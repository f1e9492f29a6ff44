package ratelimit

import (
	"sync/atomic"
	"time"
)

// An Event tells an observer (see [WithObserver]) about one request a
// Limiter decided, or could not decide. Its fields are the Limiter's
// configuration and the store's answer, never the client's identity: the
// key is not in it, so that an observer cannot leak it into metric labels
// or logs by accident.
type Event struct {
	// Namespace is the Limiter's namespace (see [New]).
	Namespace string

	// Route is the pattern of the route table (see [WithRoutes]) whose
	// limits applied, or "" for the limits of [WithLimits] and
	// [WithLimitsFunc] outside any route.
	Route string

	// Outcome says what became of the request, in lower snake case, ready
	// to be a metric label value:
	//
	//	"allowed"      every limit let the request through
	//	"denied"       a limit denied it: 429, or the deny handler's answer
	//	"banned"       the key is banned (see [Ban]), or this denial started a ban
	//	"would_deny"   Shadow limits alone would deny it, and it was served
	//	               (see [Limit]'s Shadow, [WithDryRun]); the Decision is
	//	               the one they would have denied it by
	//	"store_error"  the store failed; the error handler answered
	//	"canceled"     the request's context ended before the store decided
	//	"bad_request"  no key, or an invalid cost or limits ([ErrInvalid])
	//	"charged"      its response done, its usage was charged (see [Limiter.End])
	//	"changed"      not a request's: an operator changed an override
	//	               through the package admin's handler (see Who)
	//
	// A request admitted under limits charged from usage makes two
	// events: "allowed", then "charged" (or "store_error" when the charge
	// failed).
	Outcome string

	// Cost is the units the request asked for (see [WithCost]), or, for
	// "charged", the usage charged; 0 for a bad request whose cost was
	// never read.
	Cost int

	// Latency is how long the store took to decide, or to fail: the
	// call's wall time. Zero when the store was not asked (a bad request
	// before the call).
	Latency time.Duration

	// Decision is the store's decision when one was made (allowed, denied,
	// banned, would_deny): its Results name each limit (Result.Limit.Name,
	// the policy's name in the headers) and say which denied, and its
	// Fallback field whether an in-process fallback decided. The zero
	// Decision otherwise.
	Decision Decision

	// Who, What, Before and After describe a change, for the outcome
	// "changed": who made it (as the admin handler's Options.Who says),
	// what it changed ("override gen-tpm" and the key, "shadow login"),
	// and the override before and after it, as JSON ("" for none). They
	// are empty for every other outcome. What, Before and After may hold
	// a key as the store is given it: keep them out of metric labels.
	Who, What, Before, After string

	// Err is why the request was not decided (store_error, canceled,
	// bad_request); nil otherwise. It may hold the key (a Redis error
	// naming it): do not put it in metric labels.
	Err error
}

// The values of Event.Outcome.
const (
	outcomeAllowed    = "allowed"
	outcomeDenied     = "denied"
	outcomeBanned     = "banned"
	outcomeWouldDeny  = "would_deny"
	outcomeStoreError = "store_error"
	outcomeCanceled   = "canceled"
	outcomeBadRequest = "bad_request"
	outcomeCharged    = "charged"
	outcomeChanged    = "changed"
)

// Kinds of log lines a Limiter throttles separately.
const (
	logStoreError = iota
	logRequestError
	logDryRun
	logOverride
	logKinds
)

// logThrottle lets at most one line of each kind through per second, and
// counts the ones it holds back. The zero value is ready to use.
type logThrottle struct {
	last    [logKinds]atomic.Int64 // unix nanoseconds of the last line
	dropped [logKinds]atomic.Int64
}

// allow reports whether a line of kind may be logged now, and how many
// were held back since the last one.
func (t *logThrottle) allow(kind int) (ok bool, dropped int64) {
	now := time.Now().UnixNano()
	last := t.last[kind].Load()
	if now-last < int64(time.Second) || !t.last[kind].CompareAndSwap(last, now) {
		t.dropped[kind].Add(1)
		return false, 0
	}
	return true, t.dropped[kind].Swap(0)
}
