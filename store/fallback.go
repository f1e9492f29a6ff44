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

// Fallback is a [ratelimit.Store] that decides with Redis and, when Redis
// fails or is slow, with an in-process store (see [NewMemory]), so that a
// Redis outage never becomes an outage of the service.
//
// When Redis is unavailable (the network, a restart, a failover, a paused
// or full server), misconfigured (see [ErrMisconfigured]: logged at ERROR,
// with what to fix), or overruns a decision's FallbackOptions.Budget, the
// request is decided in process and Redis is marked down: later requests
// are decided in process at once, until a goroutine checking Redis every
// FallbackOptions.ProbeInterval (see [Redis.Check]) finds that it can
// decide and the client can lend connections for decisions. Meanwhile
// each instance enforces the limits on its own, divided by
// FallbackOptions.Instances to keep the total near the limit; a request
// costing more than a divided limit's capacity is denied. Decisions made
// in process have Decision.Fallback set.
//
// No request fails because Redis is away: one of a leased limit whose
// budget ran out while it waited for another request's answer from Redis
// is decided in process too, at once, without marking Redis down (the
// request it waited for judges Redis), and what it admitted is brought to
// Redis in the background.
//
// Bans (see [ratelimit.Ban]) follow the decisions: counted and kept in
// Redis, for every instance, while Redis decides; in the in-process
// store, for this instance alone, with the ban's whole After (only quotas
// and bursts are divided), while decisions are made in process. When Redis
// answers again, the admissions and resets made in process are brought to
// it, but not the strikes nor the bans: a key banned in process alone is
// free again on Redis, and a ban Redis holds resumes there, unless a Reset
// ended it. A request the in-process share cannot hold is denied without a
// strike.
//
// Errors about the request are returned, not hidden: invalid input, a
// canceled request, a key holding a foreign value.
//
// Build it with [NewFallback]; the zero Fallback is not usable. Fallback
// is safe for concurrent use. Close stops its goroutines.
type Fallback struct {
	redis *Redis
	impl  *fallback.Fallback
}

var _ ratelimit.Store = (*Fallback)(nil)

// FallbackOptions configures [NewFallback]. The zero value means every
// default.
type FallbackOptions struct {
	// Budget is how long a decision may wait for Redis before it is made
	// in process. Zero means 50ms.
	Budget time.Duration

	// ProbeInterval is how often a down Redis is checked. Zero means
	// 500ms.
	ProbeInterval time.Duration

	// Instances is how many instances of the service share the limits.
	// While Redis is down each instance enforces 1/Instances of every
	// limit's quota and burst, rounded up. Zero means 1: each enforces the
	// whole limit.
	Instances int

	// Local configures the in-process store used while Redis is down (see
	// [NewMemory]). The zero value means its defaults.
	Local MemoryOptions

	// MaxBacklog bounds how many keys' in-process resets and admissions a
	// Fallback keeps while Redis is down, to bring them to Redis when it
	// comes back. Past it, Reset returns an error. Zero means 100,000.
	MaxBacklog int

	// HealthHook, when set, is called when Redis goes down (up false, with
	// the error) and when it comes back (up true, nil). It runs on the
	// goroutine that saw the change and must not block.
	HealthHook func(up bool, err error)

	// Logger receives Redis going down (a warning with its cause and the
	// error; for a misconfiguration an error, with what to fix) and coming
	// back (info, with how long it was down). An outage of the same cause
	// as one logged less than a minute ago is not logged, nor is its end;
	// the next line of that cause counts them. Nil means slog.Default().
	Logger *slog.Logger
}

// NewFallback returns a store that decides with r, and in process while r
// is unavailable or misconfigured. It checks r once, at once, in the
// background (see [Redis.Check]), so that a misconfiguration only some
// decisions would meet (a command a script calls only on a denial) is
// logged now. r's client must honor context deadlines
// (ContextTimeoutEnabled: true in go-redis's options), or the budget could
// not cut a slow call short; NewFallback checks it where it can.
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

// End implements [ratelimit.Store]. It charges Redis, within the budget,
// when Redis is up; an outage or a misconfiguration marks Redis down, as
// in Allow, and the usage is then charged in process, under this
// instance's share of each limit, and brought to Redis when it answers
// again. A charge reaching Redis after the budget is not made there.
func (f *Fallback) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, admitted ratelimit.Decision) (ratelimit.Decision, error) {
	return f.impl.End(ctx, key, usage, limits, admitted)
}

// Peek implements [ratelimit.Store]. It asks Redis, within the budget,
// when Redis is up; an outage or a misconfiguration marks Redis down, as
// in Allow. While Redis is down, and for a key whose decisions in process
// still wait for Redis, it answers in process, with Decision.Fallback
// set, as the next Allow in process would (from what Redis last said of
// the key if that decision would start from it). A Peek records nothing,
// anywhere, and is not counted in [Fallback.Health].
func (f *Fallback) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return f.impl.Peek(ctx, key, cost, limits)
}

// Reset implements [ratelimit.Store]. It forgets key's state for limits
// in process and on Redis. While Redis is down, the reset is kept and
// applied on Redis before decisions return to it, so it is never lost;
// in process, the key's next request starts afresh at once. It returns an
// error only for invalid input, for an error from Redis that is not an
// outage, or when the backlog is full (see FallbackOptions.MaxBacklog).
func (f *Fallback) Reset(ctx context.Context, key string, limits *ratelimit.Limits) error {
	return f.impl.Reset(ctx, key, limits)
}

// Close stops the probing goroutine and waits for it. Decisions still
// work afterwards, but a down Redis is no longer probed.
func (f *Fallback) Close() error { return f.impl.Close() }

// FallbackHealth is a snapshot of a [Fallback] (see [Fallback.Health]):
// where its decisions are made, since when, its last Redis failure, and
// its counts.
//
// It marshals with encoding/json to what a status page needs, never to
// the error's own text, which may hold an address or a key:
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
// Serve it on an internal port, and let it answer 200 while decisions are
// made in process: failing readiness on every instance because Redis is
// down would turn a Redis outage into an outage of the service. Alert on
// the Fallback's metrics or on this body instead.
type FallbackHealth struct {
	// Decisions is where decisions are made now: "redis", or "in_process"
	// while Redis is down.
	Decisions string `json:"decisions"`

	// Since is when decisions last moved to where they are now, or, when
	// they never moved, when the Fallback was made.
	Since time.Time `json:"since"`

	// LastError is the last failure of a call to Redis (a decision, or a
	// check while Redis was down), nil when none failed yet; it stays after
	// Redis recovers. Its text may name an address or a key: log it, do not
	// serve it; it is never marshaled.
	LastError error `json:"-"`

	// LastErrorKind names LastError in words safe to serve: "" (none
	// yet), "timeout" (a call overran the budget), "unavailable" (Redis
	// unreachable, or an error that passes: a restart, a failover, a full
	// or read-only server) or "misconfigured: " and what is wrong (see
	// [ErrMisconfigured]; naming neither a password nor a key).
	LastErrorKind string `json:"last_error"`

	// LastErrorAt is when LastError happened; zero, and left out of the
	// JSON, while none has.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`

	// Waiting is how many keys have decisions made in process yet to
	// reach Redis: while Redis is down, every key decided since it failed
	// (at most FallbackOptions.MaxBacklog); once it is back, those not
	// handed back yet, decided in process until then. A key with a request
	// decided in process while Redis was up (see above) counts until that
	// decision reaches Redis, and stays on Redis meanwhile. It falls to 0
	// when every key is back on Redis.
	Waiting int64 `json:"waiting"`

	// The counts since the Fallback was made.
	Local         uint64 `json:"local"`         // decisions made in process
	Failures      uint64 `json:"failures"`      // Redis calls that failed or overran the budget
	Misconfigured uint64 `json:"misconfigured"` // of those, the ones that failed for a misconfiguration (see ErrMisconfigured)
	Outages       uint64 `json:"outages"`       // times decisions went in process because Redis failed
	Recoveries    uint64 `json:"recoveries"`    // times Redis came back
	Reconciled    uint64 `json:"reconciled"`    // keys whose in-process resets and admissions were brought to Redis
}

// Health returns where decisions are made now, since when, the last Redis
// failure, and the counts so far, each read on its own: under load, one
// may include an event another does not yet. It is safe to call at any
// time. A Peek is not counted.
func (f *Fallback) Health() FallbackHealth { return FallbackHealth(f.impl.Health()) }
