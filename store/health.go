package store

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"
)

// FallbackHealth says where a [Fallback]'s decisions are made, for a
// status page or a probe: see [Fallback.Health].
type FallbackHealth struct {
	// OnRedis reports that decisions go to Redis; false while they are
	// made in process.
	OnRedis bool

	// Since is when decisions last moved to where they are now, or, when
	// they never moved, when the Fallback was made.
	Since time.Time

	// LastError is the last failure of a call to Redis (a decision, or a
	// check while Redis was down), nil when none failed yet; LastErrorAt
	// is when it happened. It stays after Redis recovers. Its text may
	// name an address or a key: log it, do not serve it.
	LastError   error
	LastErrorAt time.Time
}

// failure is a Redis call's error and when it happened.
type failure struct {
	err error
	at  time.Time
}

// Health returns where decisions are made now, since when, and the last
// Redis failure. It is safe to call at any time.
func (f *Fallback) Health() FallbackHealth {
	h := FallbackHealth{OnRedis: !f.down.Load(), Since: time.Unix(0, f.movedAt.Load())}
	if e := f.lastErr.Load(); e != nil {
		h.LastError, h.LastErrorAt = e.err, e.at
	}
	return h
}

// HealthHandler returns a handler that answers every request with the
// Fallback's [Fallback.Health] as JSON, always with status 200:
//
//	{"decisions":"in_process","since":"2026-11-24T20:31:07.5Z","last_error":"unavailable","last_error_at":"2026-11-24T20:31:07.5Z"}
//
// decisions is "redis" or "in_process"; last_error is "" (none yet),
// "timeout" (a call overran the budget), "unavailable" (Redis could not
// be reached or answered an error that passes: a restart, a failover, a
// full or read-only server) or "misconfigured: " and what is wrong (see
// [ConfigError]; its Problem, which names neither a password nor a key).
// The error's own text is never served, since it may hold an address or a
// key.
//
// Serve it on an internal port for operators and dashboards. It answers
// 200 while decisions are made in process, on purpose: a readiness probe
// must not take instances out of service because Redis is down, since
// deciding in process is what the Fallback is for, and failing readiness
// on every instance at once would turn a Redis outage into an outage of
// the service. Alert on the fallback's metrics or on this body instead.
func (f *Fallback) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := f.Health()
		body := healthBody{Decisions: "redis", Since: h.Since.UTC()}
		if !h.OnRedis {
			body.Decisions = "in_process"
		}
		if h.LastError != nil {
			body.LastError = describeFailure(h.LastError)
			at := h.LastErrorAt.UTC()
			body.LastErrorAt = &at
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(body)
	})
}

type healthBody struct {
	Decisions   string     `json:"decisions"`
	Since       time.Time  `json:"since"`
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// describeFailure names what kind of failure err is, in words safe to
// serve: never err's own text.
func describeFailure(err error) string {
	var ce *ConfigError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return "misconfigured: " + ce.Problem
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "unavailable"
}
