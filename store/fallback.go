package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
)

// Defaults of FallbackOptions.
const (
	defaultBudget        = 50 * time.Millisecond
	defaultProbeInterval = 500 * time.Millisecond
)

// Fallback is a [ratelimit.Store] that decides with Redis and, when Redis
// fails or is slow, with an in-process store (see [NewMemory]), so that a Redis
// outage never becomes an outage of the service.
//
// Each decision has a time budget (see FallbackOptions.Budget). When Redis is
// unavailable (the network, a restart, a failover, a paused or full
// server), is misconfigured (see [ErrMisconfigured]: logged at ERROR, with
// what to fix), or overruns the budget, the request is decided in process,
// Redis is marked down, and later requests skip it: they are decided in
// process at once. One goroutine then checks Redis every probe interval
// (see FallbackOptions.ProbeInterval and [Redis.Check]) and, as soon as Redis can
// decide and the client can lend connections for decisions, they go back
// to it. While Redis is down, each instance enforces the limits on its
// own; FallbackOptions.Instances divides them to keep the total near the
// limit.
// Decisions made in process have Decision.Fallback set. A request costing
// more than a divided limit's capacity is denied while Redis is down.
//
// Bans (see [ratelimit.Ban]) follow the decisions: while Redis decides,
// they are counted and kept in Redis, for every instance; while a
// decision is made in process, in the in-process store, for this instance
// alone, with the ban's whole After (only quotas and bursts are divided).
// When Redis answers again, what was admitted in process and the resets
// made meanwhile are brought to it, but not the strikes counted nor the
// bans started in process: a key banned in process alone is free again on
// Redis, and a ban Redis holds resumes there, unless a Reset ended it. A
// request the in-process share cannot hold is denied without a strike.
//
// Errors about the request are returned, not hidden: invalid input, a
// canceled request, a key holding a foreign value.
//
// Build it with [NewFallback]; the zero Fallback is not usable. Fallback
// is safe for concurrent use. Close stops its goroutines.
type Fallback struct {
	redis     *Redis
	local     *memory.Store
	budget    time.Duration
	interval  time.Duration
	instances int
	hook      func(up bool, err error)
	logger    *slog.Logger
	probed    func(start time.Time, ok bool) // tests: after each probe

	down        atomic.Bool
	reconciling atomic.Bool // some keys' backlogs still wait for Redis
	mu          sync.Mutex
	stop        chan struct{} // closed to stop the prober; nil when none runs
	wg          sync.WaitGroup
	closed      bool
	logged      map[string]loggedLine   // what was logged lately, by what it said (see logOnce)
	untold      atomic.Pointer[failure] // the timeout that sent decisions to memory, for the prober to log with its cause
	downLogged  atomic.Bool             // this outage's line was logged, not held back as a repeat

	nLocal   atomic.Uint64
	nFailed  atomic.Uint64
	nConfig  atomic.Uint64
	nRevived atomic.Uint64
	nCharged atomic.Uint64
	nDown    atomic.Uint64
	downAt   atomic.Int64 // unix ns when Redis was last marked down
	movedAt  atomic.Int64 // unix ns when decisions last moved (to memory or back), or the Fallback was made
	lastErr  atomic.Pointer[failure]

	seen    *lastSeen // what Redis last said of recent keys
	backlog backlog   // what was decided in process, for Redis
	clock   clock     // the Fallback's clock, and Redis's against it
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

	// Logger receives Redis going down (a warning, with its cause and the
	// error, or for a misconfiguration an error, with what to fix) and
	// coming back (info, with how long it was down). An outage with the
	// cause of one logged less than a minute ago is not logged, nor is its
	// end; the next line of that cause counts them. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// NewFallback returns a store that decides with r, and in process while r
// is unavailable or misconfigured. It checks r once at once, in the
// background (see [Redis.Check]), so that a misconfiguration only some
// decisions would meet, such as a command a script calls only on a denial,
// is found and logged now. r's client must honor context deadlines
// (ContextTimeoutEnabled: true in go-redis's options), or the budget
// could not cut a slow call short; NewFallback checks it for the clients
// that expose their options.
func NewFallback(r *Redis, opts FallbackOptions) (*Fallback, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: store.NewFallback: the Redis store is nil", ratelimit.ErrInvalid)
	}
	if !honorsDeadlines(r.client) {
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
	f := &Fallback{
		redis:     r,
		budget:    cmp.Or(opts.Budget, defaultBudget),
		interval:  cmp.Or(opts.ProbeInterval, defaultProbeInterval),
		instances: cmp.Or(opts.Instances, 1),
		hook:      opts.HealthHook,
		logger:    cmp.Or(opts.Logger, slog.Default()),
	}
	f.backlog.max = int64(cmp.Or(opts.MaxBacklog, defaultMaxBacklog))
	f.clock.start = time.Now()
	f.movedAt.Store(f.clock.start.UnixNano())
	var err error
	if f.local, err = memory.New(opts.Local.internal()); err != nil {
		return nil, fmt.Errorf("store.NewFallback: FallbackOptions.Local: %w", err)
	}
	f.seen = newLastSeen(f.local.MaxKeys())
	f.wg.Add(1)
	go f.checkAtStart()
	return f, nil
}

// honorsDeadlines reports whether a go-redis client applies context
// deadlines to its commands, when it can tell.
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
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	for {
		if !f.down.Load() {
			if f.reconciling.Load() {
				if d, err, decided := f.allowLocally(ctx, key, cost, given, set, true); decided {
					return d, err
				}
			}
			t := time.Now()
			now := f.clock.at(t)
			d, err := f.redis.decide(ctx, &request{key: key, cost: cost, limits: given, set: set, deadline: f.deadline(now), until: t.Add(f.budget)})
			if err == nil {
				if d.Banned == 0 { // a ban's answer says nothing of the limits
					f.seen.put(key, set.Limits, d.Results(), now, int64(f.budget/time.Microsecond))
				}
				if !f.down.Load() {
					return d, nil
				}
				// Redis was marked down while this decision was under
				// way (another overran the budget, or a check found
				// Redis misconfigured): decisions in process may have
				// started from a count older than this answer. So it
				// is decided in process too, after the answer was
				// recorded: what Redis admitted counts twice, which
				// may deny early but never admits too many.
			} else if faultOf(ctx, err) == noFault {
				if errors.Is(err, errLeaseWait) && ctx.Err() == nil && f.down.Load() {
					continue // the request it waited on found Redis failing: decide in process
				}
				return d, err
			} else {
				f.fail(err)
			}
		}
		if d, err, decided := f.allowLocally(ctx, key, cost, given, set, false); decided {
			return d, err
		}
	}
}

// End implements [ratelimit.Store]. It charges Redis, within the budget,
// when Redis is up; an outage or a misconfiguration marks Redis down, as
// in Allow, and the usage is then charged in process, under this
// instance's share of each limit, and brought to Redis when it answers
// again, as the admissions decided in process are. A charge that reaches
// Redis after the budget is not made there.
func (f *Fallback) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, admitted ratelimit.Decision) (ratelimit.Decision, error) {
	given, set, err := limitset.CheckEnd(key, usage, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	slot := admitted.Lease // a slot Redis gave: given back there
	if admitted.Fallback {
		f.local.Release(key, slot, set.Share(f.instances)) // a slot of this instance's share
		slot = ""
	}
	for {
		if !f.down.Load() {
			if f.reconciling.Load() {
				if d, ended := f.endLocally(key, usage, given, set, true); ended {
					return d, nil
				}
			}
			t := time.Now()
			rctx, cancel := context.WithTimeout(ctx, f.budget)
			d, err := f.redis.end(rctx, &request{key: key, limits: given, set: set, deadline: f.deadline(f.clock.at(t))}, usage, slot)
			cancel()
			if err == nil || faultOf(ctx, err) == noFault {
				return d, err
			}
			f.fail(err)
		}
		if d, ended := f.endLocally(key, usage, given, set, false); ended {
			return d, nil
		}
	}
}

// Peek implements [ratelimit.Store]. It asks Redis, within the budget,
// when Redis is up; an outage or a misconfiguration marks Redis down, as
// in Allow. While Redis is down, and for a key whose decisions in process
// still wait for Redis, it answers in process, under this instance's
// share of each limit, with Decision.Fallback set, as the next Allow in
// process would: from what Redis last said of the key if that decision
// would start from it. A Peek records nothing, for Redis or in process,
// and is not counted in [Fallback.Health].
func (f *Fallback) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	for {
		if !f.down.Load() {
			if f.reconciling.Load() {
				if d, peeked := f.peekLocally(key, cost, given, set, true); peeked {
					return d, nil
				}
			}
			rctx, cancel := context.WithTimeout(ctx, f.budget)
			d, err := f.redis.peek(rctx, &request{key: key, cost: cost, limits: given, set: set})
			cancel()
			if err == nil || faultOf(ctx, err) == noFault {
				return d, err
			}
			f.fail(err)
		}
		if d, peeked := f.peekLocally(key, cost, given, set, false); peeked {
			return d, nil
		}
	}
}

// Reset implements [ratelimit.Store]. It forgets key's state for limits
// in process and on Redis. While Redis is down, the reset is kept and
// applied on Redis when it answers again, before decisions return to it,
// so that a reset made during an outage is never lost and the key is not
// locked out meanwhile: in process, its next request starts afresh at
// once. It returns an error only for invalid input, for an error from
// Redis that is not an outage, or when the backlog is full (see
// FallbackOptions.MaxBacklog).
func (f *Fallback) Reset(ctx context.Context, key string, limits *ratelimit.Limits) error {
	_, set, err := limitset.Check(key, 1, limits)
	if err != nil {
		return err
	}
	local := set.Share(f.instances)
	for {
		if !f.down.Load() && f.reconciling.Load() {
			// A key whose backlog waits for Redis is reset there with it.
			sh := f.backlog.shard(key)
			sh.mu.Lock()
			if sh.keys[key] != nil && !f.down.Load() {
				err := f.resetLocally(sh, key, set, local)
				sh.mu.Unlock()
				return err
			}
			sh.mu.Unlock()
		}
		if !f.down.Load() {
			rctx, cancel := context.WithTimeout(ctx, f.budget)
			err := f.redis.Reset(rctx, key, limits)
			cancel()
			if err == nil {
				f.seen.forget(key, set.Limits)
				f.local.Forget(key, local, true)
				return nil
			}
			if faultOf(ctx, err) == noFault {
				return err
			}
			f.fail(err)
		}
		sh := f.backlog.shard(key)
		sh.mu.Lock()
		if f.down.Load() {
			err := f.resetLocally(sh, key, set, local)
			sh.mu.Unlock()
			return err
		}
		sh.mu.Unlock() // Redis came back meanwhile: reset it there
	}
}

// Close stops the probing goroutine and waits for it. Decisions still
// work afterwards, but a down Redis is no longer probed.
func (f *Fallback) Close() error {
	f.mu.Lock()
	f.closed = true
	if f.stop != nil {
		close(f.stop)
		f.stop = nil
	}
	f.mu.Unlock()
	f.wg.Wait()
	if e := f.untold.Swap(nil); e != nil {
		f.logDown(e.err, nil, time.Now()) // the prober stopped before it could
	}
	return nil
}
