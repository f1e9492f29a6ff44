package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/fallback"
)

// Fallback is a [ratelimit.Store] that decides with Redis and, while Redis
// is unavailable, misconfigured (see [ErrMisconfigured]) or overruns
// FallbackOptions.Budget, in process (see [NewMemory]), each instance
// under its share of every limit (a request costing more is denied), with
// Decision.Fallback set. Once Redis can decide again (see [Redis.Check]),
// what was admitted and reset in process is brought to it; strikes and
// bans (see [ratelimit.Ban]) are not. Errors about the request are
// returned, not hidden. See docs/production.md.
//
// Build it with [NewFallback]; the zero Fallback is not usable. Fallback
// is safe for concurrent use. Close stops its goroutines.
type Fallback struct {
	redis *Redis
	impl  *fallback.Fallback
}

var _ ratelimit.Store = (*Fallback)(nil)

// FallbackOptions configures [NewFallback]. The zero value means all defaults.
type FallbackOptions struct {
	// Budget is how long a decision may wait for Redis. Zero means 50ms.
	Budget time.Duration

	// ProbeInterval is how often a down Redis is checked. Zero means 500ms.
	ProbeInterval time.Duration

	// Instances is how many instances of the service share the limits.
	// While Redis is down each instance enforces 1/Instances of every
	// limit's quota and burst, rounded up. Zero means 1.
	Instances int

	// Local configures the in-process store used while Redis is down.
	Local MemoryOptions

	// MaxBacklog bounds how many keys' in-process resets and admissions a
	// Fallback keeps while Redis is down, to bring them to Redis when it
	// comes back. Past it, Reset returns an error. Zero means 100,000.
	MaxBacklog int

	// HealthHook, when set, is called when Redis goes down (up false, with
	// the error) and when it comes back (up true, nil). It runs on the
	// goroutine that saw the change and must not block.
	HealthHook func(up bool, err error)

	// Logger receives Redis going down (a warning; an error for a
	// misconfiguration) and coming back, repeats within a minute held back
	// (see docs/production.md). Nil means slog.Default().
	Logger *slog.Logger
}

// NewFallback returns a store that decides with r, and in process while r
// is unavailable or misconfigured. It checks r once in the background (see
// [Redis.Check]), so that a misconfiguration is logged at once. r's client
// must honor context deadlines (ContextTimeoutEnabled: true, checked where
// it can be), or the budget could not cut a slow call short.
func NewFallback(r *Redis, opts FallbackOptions) (*Fallback, error) {
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: store.NewFallback: the Redis store is nil", ratelimit.ErrInvalid)
	case !honorsDeadlines(r.client):
		return nil, fmt.Errorf("%w: store.NewFallback: the go-redis client ignores context deadlines; set ContextTimeoutEnabled: true in its options so that the time budget can cut a slow call short", ratelimit.ErrInvalid)
	}
	for _, o := range []struct {
		field string
		value int64
	}{{"Budget", int64(opts.Budget)}, {"ProbeInterval", int64(opts.ProbeInterval)}, {"Instances", int64(opts.Instances)}, {"MaxBacklog", int64(opts.MaxBacklog)}} {
		if o.value < 0 {
			return nil, fmt.Errorf("%w: store.FallbackOptions.%s is negative; zero means the default", ratelimit.ErrInvalid, o.field)
		}
	}
	impl, err := fallback.New(primary{r}, fallback.Options{
		Budget:        opts.Budget,
		ProbeInterval: opts.ProbeInterval,
		Instances:     opts.Instances,
		Local:         opts.Local.internal(),
		MaxBacklog:    opts.MaxBacklog,
		HealthHook:    opts.HealthHook,
		Logger:        opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Fallback{redis: r, impl: impl}, nil
}

// honorsDeadlines reports whether c applies context deadlines, if known.
func honorsDeadlines(c RedisClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Allow implements [ratelimit.Store].
func (f *Fallback) Allow(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return f.impl.Allow(ctx, key, cost, limits)
}

// End implements [ratelimit.Store], charging where Allow would decide: on
// Redis within the budget (a charge reaching it later is not made), else
// in process, brought to Redis when it answers again.
func (f *Fallback) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, admitted ratelimit.Decision) (ratelimit.Decision, error) {
	return f.impl.End(ctx, key, usage, limits, admitted)
}

// Peek implements [ratelimit.Store], answering as the next Allow would,
// where it would decide. It records nothing, anywhere, and is not counted
// in [Fallback.Health].
func (f *Fallback) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return f.impl.Peek(ctx, key, cost, limits)
}

// Reset implements [ratelimit.Store]. It forgets key's state for limits
// in process at once and on Redis, while Redis is down before decisions
// return to it. It returns an error only for invalid input, for an error
// from Redis that is not an outage, or when the backlog is full (see
// FallbackOptions.MaxBacklog).
func (f *Fallback) Reset(ctx context.Context, key string, limits *ratelimit.Limits) error {
	return f.impl.Reset(ctx, key, limits)
}

// Close stops the probing goroutine and waits for it. Decisions still
// work afterwards, but a down Redis is no longer probed.
func (f *Fallback) Close() error { return f.impl.Close() }

// FallbackHealth is a snapshot of a [Fallback] (see [Fallback.Health]).
// It marshals with encoding/json to what a status page needs, never to
// the error's own text. Serve it, but do not fail readiness on it: see
// docs/observability.md#health.
type FallbackHealth struct {
	// Decisions is where decisions are made now: "redis" or "in_process".
	Decisions string `json:"decisions"`

	// Since is when decisions last moved, or else when the Fallback was made.
	Since time.Time `json:"since"`

	// LastError is the last failure of a call to Redis, nil when none
	// failed yet; it stays after Redis recovers. Its text may name an
	// address or a key: log it, do not serve it; it is never marshaled.
	LastError error `json:"-"`

	// LastErrorKind names LastError in words safe to serve: "" (none
	// yet), "timeout" (a call overran the budget), "unavailable" (Redis
	// unreachable, or an error that passes: a restart, a failover, a full
	// or read-only server) or "misconfigured: " and what is wrong.
	LastErrorKind string `json:"last_error"`

	// LastErrorAt is when LastError happened, zero and omitted while none has.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`

	// Waiting is how many keys are decided in process until what was
	// decided for them there reaches Redis; 0 when every key is back.
	Waiting int64 `json:"waiting"`

	// The counts since the Fallback was made.
	Local         uint64 `json:"local"`         // decisions made in process
	Failures      uint64 `json:"failures"`      // Redis calls that failed or overran the budget
	Misconfigured uint64 `json:"misconfigured"` // of those, the ones that failed for a misconfiguration (see ErrMisconfigured)
	Outages       uint64 `json:"outages"`       // times decisions went in process because Redis failed
	Recoveries    uint64 `json:"recoveries"`    // times Redis came back
	Reconciled    uint64 `json:"reconciled"`    // keys whose in-process resets and admissions were brought to Redis
}

// Health returns a snapshot of f, each count read on its own: under load,
// one may include an event another does not yet. It is safe to call at
// any time.
func (f *Fallback) Health() FallbackHealth { return FallbackHealth(f.impl.Health()) }
