package fallback

import (
	"context"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// Primary is the store a Fallback decides with while it answers: the
// Redis store (store/primary.go). A Fallback calls nothing else of it.
type Primary interface {
	// Decide, End, Peek and Reset are the primary's Allow, End, Peek and
	// Reset. End gives back slot, a slot the primary lent on admission (""
	// for none). c is passed by value, so that it stays off the heap.
	Decide(ctx context.Context, c Call) (ratelimit.Decision, error)
	End(ctx context.Context, c Call, usage int, slot string) (ratelimit.Decision, error)
	Peek(ctx context.Context, c Call) (ratelimit.Decision, error)
	Reset(ctx context.Context, key string, limits *ratelimit.Limits) error

	// Forget stops renewing slot, a slot or holds the primary lent, whose
	// request ended in process: on the primary they lapse.
	Forget(slot string)

	// Probe checks the primary as p says; for Recover and ReadClock, it
	// returns the primary's clock minus now's (µs), now read around it.
	Probe(ctx context.Context, p Probe, now func() int64) (offset int64, err error)

	// Charge runs each of charges on the primary, at their times on its
	// clock (offset: its clock minus the Fallback's, µs), setting each Err.
	Charge(ctx context.Context, charges []*Charge, offset int64)

	// Explain says what err, returned by a call above for a request whose
	// context is ctx, means for the Fallback.
	Explain(ctx context.Context, err error) Failure
}

// A Call is a key's checked request to the primary, and its caller's wait.
type Call struct {
	Key    string
	Cost   int               // 0 for End
	Limits []ratelimit.Limit // as given
	Set    *spec.Set         // Limits compiled
	// Deadline, when not 0, is when the primary stops deciding c, on its
	// own clock (µs): after it, the caller has decided in process.
	Deadline int64
	Until    time.Time // when not zero, the caller stops waiting then, as if ctx ended
}

// Probe is what Primary.Probe checks.
type Probe int

const (
	Check Probe = iota // can the primary decide? (once, when the Fallback is made)
	// Recover: Check, then read the primary's clock, then make it ready
	// to decide at once (the prober, while the primary is down).
	Recover
	ReadClock // read the primary's clock only
)

// Fault is what an error of the primary's means for a Fallback.
type Fault int

const (
	// None: the error is the request's (invalid input, a canceled
	// request, a key holding a foreign value), returned to its caller.
	None Fault = iota
	// Waited: the request's own time ran out while it waited for the
	// answer another request of this instance was getting from the
	// primary; no fault of the primary's, which that request judges.
	Waited
	// Outage: the primary cannot decide now and may later.
	Outage
	// Misconfigured: the primary refuses the store's setup (store.ErrMisconfigured).
	Misconfigured
)

// failing reports whether the fault is the primary's: decide in process.
func (f Fault) failing() bool { return f == Outage || f == Misconfigured }

// Failure is what Primary.Explain says of an error.
type Failure struct {
	Fault Fault
	// Cause names the failure in a few words that hold no address, key or
	// password: "connection refused", "timeout", "Redis answered
	// LOADING", or a misconfiguration's Problem.
	Cause string
	// Problems are the misconfigurations in the error, each with its fix.
	Problems []Problem
}

// Problem is one misconfiguration, its fix, and the error that showed it.
type Problem struct {
	What, Fix string
	Err       error
}

// fault returns what err means for a request whose context is ctx.
func (f *Fallback) fault(ctx context.Context, err error) Fault {
	if err == nil {
		return None
	}
	return f.primary.Explain(ctx, err).Fault
}
