package store

import (
	"context"
	"errors"
	"net"
	"time"
)

// FallbackHealth is a snapshot of a [Fallback]: where its decisions are
// made, since when, its last Redis failure, and what it has counted since
// it was made. See [Fallback.Health].
//
// It marshals with encoding/json to what a status page or an operator
// needs, and never to the error's own text, which may hold an address or a
// key:
//
//	{"decisions":"in_process","since":"2026-11-24T20:31:07.5Z","last_error":"unavailable","last_error_at":"2026-11-24T20:31:07.5Z",
//	 "waiting":9,"local":12,"failures":1,"misconfigured":0,"outages":1,"recoveries":0,"reconciled":0}
//
// So a health handler is
//
//	func(w http.ResponseWriter, r *http.Request) {
//		w.Header().Set("Content-Type", "application/json")
//		json.NewEncoder(w).Encode(f.Health())
//	}
//
// Serve it on an internal port for operators and dashboards, and let it
// answer 200 while decisions are made in process: a readiness probe must
// not take instances out of service because Redis is down, since deciding
// in process is what the Fallback is for, and failing readiness on every
// instance at once would turn a Redis outage into an outage of the
// service. Alert on the Fallback's metrics or on this body instead.
type FallbackHealth struct {
	// Decisions is where decisions are made now: "redis", or "in_process"
	// while Redis is down.
	Decisions string `json:"decisions"`

	// Since is when decisions last moved to where they are now, or, when
	// they never moved, when the Fallback was made.
	Since time.Time `json:"since"`

	// LastError is the last failure of a call to Redis (a decision, or a
	// check while Redis was down), nil when none failed yet. It stays
	// after Redis recovers. Its text may name an address or a key: log
	// it, do not serve it; it is never marshaled.
	LastError error `json:"-"`

	// LastErrorKind names LastError in words safe to serve: "" (none
	// yet), "timeout" (a call overran the budget), "unavailable" (Redis
	// could not be reached or answered an error that passes: a restart, a
	// failover, a full or read-only server) or "misconfigured: " and what
	// is wrong (see [ErrMisconfigured]; it names neither a password nor a
	// key).
	LastErrorKind string `json:"last_error"`

	// LastErrorAt is when LastError happened; zero, and left out of the
	// JSON, while none has.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`

	// Waiting is how many keys are decided in process, now, because what
	// was decided for them in process has yet to reach Redis: while Redis
	// is down, every key decided since it failed (at most
	// FallbackOptions.MaxBacklog); once it is back, those not handed back
	// yet. It falls to 0 when every key is back on Redis.
	Waiting int64 `json:"waiting"`

	// The counts since the Fallback was made.
	Local         uint64 `json:"local"`         // decisions made in process
	Failures      uint64 `json:"failures"`      // Redis calls that failed or overran the budget
	Misconfigured uint64 `json:"misconfigured"` // of those, the ones that failed for a misconfiguration (see ErrMisconfigured)
	Outages       uint64 `json:"outages"`       // times decisions went in process because Redis failed
	Recoveries    uint64 `json:"recoveries"`    // times Redis came back
	Reconciled    uint64 `json:"reconciled"`    // keys whose in-process resets and admissions were brought to Redis
}

// failure is a Redis call's error and when it happened.
type failure struct {
	err error
	at  time.Time
}

// Health returns where decisions are made now, since when, the last Redis
// failure, and the counts so far. Each is read on its own, at once: under
// load, one count may include an event another does not yet. It is safe
// to call at any time. A Peek is not counted.
func (f *Fallback) Health() FallbackHealth {
	h := FallbackHealth{
		Decisions:     "redis",
		Since:         time.Unix(0, f.movedAt.Load()).UTC(),
		Waiting:       f.backlog.keys.Load(),
		Local:         f.nLocal.Load(),
		Failures:      f.nFailed.Load(),
		Misconfigured: f.nConfig.Load(),
		Outages:       f.nDown.Load(),
		Recoveries:    f.nRevived.Load(),
		Reconciled:    f.nCharged.Load(),
	}
	if f.down.Load() {
		h.Decisions = "in_process"
	}
	if e := f.lastErr.Load(); e != nil {
		h.LastError, h.LastErrorAt, h.LastErrorKind = e.err, e.at.UTC(), describeFailure(e.err)
	}
	return h
}

// describeFailure names what kind of failure err is, in words safe to
// serve: never err's own text.
func describeFailure(err error) string {
	var m *misconfiguration
	var ne net.Error
	switch {
	case errors.As(err, &m):
		return "misconfigured: " + m.problem
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "unavailable"
}
