package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
)

// Defaults of [NewFallback].
const (
	DefaultBudget        = 50 * time.Millisecond
	DefaultProbeInterval = 500 * time.Millisecond
)

// Fallback is a [ratelimit.Store] that decides with Redis and, when Redis
// fails or is slow, with an in-process [Memory] store, so that a Redis
// outage never becomes an outage of the service.
//
// Each decision has a time budget (see [WithBudget]). When Redis is
// unavailable (the network, a restart, a failover, a paused or full
// server), is misconfigured (see [ConfigError]: logged at ERROR, with what
// to fix), or overruns the budget, the request is decided in process,
// Redis is marked down, and later requests skip it: they are decided in
// process at once. One goroutine then checks Redis every probe interval
// (see [WithProbeInterval] and [Redis.Check]) and, as soon as Redis can
// decide and the client can lend connections for decisions, they go back
// to it. While Redis is down, each instance enforces the limits on its
// own; [WithInstances] divides them to keep the total near the limit.
// Decisions made in process have Decision.Fallback set. A request costing
// more than a divided limit's capacity is denied while Redis is down.
//
// Errors about the request are returned, not hidden: invalid input, a
// canceled request, a key holding a foreign value.
//
// Fallback is safe for concurrent use. Close stops its goroutines.
type Fallback struct {
	redis     *Redis
	local     *Memory
	budget    time.Duration
	interval  time.Duration
	instances int
	hook      func(up bool, err error)
	logger    *slog.Logger

	down        atomic.Bool
	reconciling atomic.Bool // some keys' backlogs still wait for Redis
	mu          sync.Mutex
	stop        chan struct{} // closed to stop the prober; nil when none runs
	wg          sync.WaitGroup
	closed      bool
	logged      map[string]time.Time // when each misconfiguration was last logged

	scaled   shares
	nLocal   atomic.Uint64
	nFailed  atomic.Uint64
	nConfig  atomic.Uint64
	nRevived atomic.Uint64
	nCharged atomic.Uint64
	downAt   atomic.Int64 // unix ns when Redis was last marked down

	seen    *lastSeen // what Redis last said of recent keys
	backlog backlog   // what was decided in process, for Redis
	clock   clock     // the Fallback's clock, and Redis's against it
}

var (
	_ ratelimit.Store    = (*Fallback)(nil)
	_ ratelimit.Resetter = (*Fallback)(nil)
)

// FallbackOption configures [NewFallback].
type FallbackOption func(*Fallback) error

// WithBudget sets how long a decision may wait for Redis before it is made
// in process; the default is [DefaultBudget].
func WithBudget(d time.Duration) FallbackOption {
	return func(f *Fallback) error {
		if d <= 0 {
			return fmt.Errorf("%w: store.WithBudget(%v): must be positive", ratelimit.ErrInvalid, d)
		}
		f.budget = d
		return nil
	}
}

// WithProbeInterval sets how often a down Redis is pinged; the default is
// [DefaultProbeInterval].
func WithProbeInterval(d time.Duration) FallbackOption {
	return func(f *Fallback) error {
		if d <= 0 {
			return fmt.Errorf("%w: store.WithProbeInterval(%v): must be positive", ratelimit.ErrInvalid, d)
		}
		f.interval = d
		return nil
	}
}

// WithInstances says how many instances of the service share the limits.
// While Redis is down each instance enforces 1/n of every limit's quota
// and burst, rounded up; the default, 1, enforces the whole limit in each.
func WithInstances(n int) FallbackOption {
	return func(f *Fallback) error {
		if n < 1 {
			return fmt.Errorf("%w: store.WithInstances(%d): must be at least 1", ratelimit.ErrInvalid, n)
		}
		f.instances = n
		return nil
	}
}

// WithLocal sets the in-process store used while Redis is down; the
// default is NewMemory().
func WithLocal(m *Memory) FallbackOption {
	return func(f *Fallback) error {
		if m == nil {
			return fmt.Errorf("%w: store.WithLocal: the store is nil", ratelimit.ErrInvalid)
		}
		f.local = m
		return nil
	}
}

// WithMaxBacklog bounds how many keys' resets a Fallback keeps while
// Redis is down, to apply them on Redis when it comes back; the default is
// [DefaultMaxBacklog]. Past it, Reset returns an error.
func WithMaxBacklog(n int) FallbackOption {
	return func(f *Fallback) error {
		if n < 1 {
			return fmt.Errorf("%w: store.WithMaxBacklog(%d): must be at least 1", ratelimit.ErrInvalid, n)
		}
		f.backlog.max = int64(n)
		return nil
	}
}

// WithHealthHook calls hook when Redis goes down (up false, with the
// error) and when it comes back (up true, nil). It runs on the goroutine
// that saw the change and must not block.
func WithHealthHook(hook func(up bool, err error)) FallbackOption {
	return func(f *Fallback) error {
		f.hook = hook
		return nil
	}
}

// WithFallbackLogger sets where Redis going down (a warning, with the
// error) and coming back (info, with how long it was down) is logged; the
// default is slog.Default(). Every change is logged: there is at most one
// of each per probe interval.
func WithFallbackLogger(l *slog.Logger) FallbackOption {
	return func(f *Fallback) error {
		if l == nil {
			return fmt.Errorf("%w: store.WithFallbackLogger: the logger is nil", ratelimit.ErrInvalid)
		}
		f.logger = l
		return nil
	}
}

// NewFallback returns a store that decides with r, and in process while r
// is unavailable or misconfigured. It checks r once at once, in the
// background (see [Redis.Check]), so that a misconfiguration only some
// decisions would meet, such as a command a script calls only on a denial,
// is found and logged now. r's client must honor context deadlines
// (ContextTimeoutEnabled: true in go-redis's options), or the budget
// could not cut a slow call short; NewFallback checks it for the clients
// that expose their options.
func NewFallback(r *Redis, opts ...FallbackOption) (*Fallback, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: store.NewFallback: the Redis store is nil", ratelimit.ErrInvalid)
	}
	if !honorsDeadlines(r.client) {
		return nil, fmt.Errorf("%w: store.NewFallback: the go-redis client ignores context deadlines; set ContextTimeoutEnabled: true in its options so that the time budget can cut a slow call short", ratelimit.ErrInvalid)
	}
	f := &Fallback{redis: r, budget: DefaultBudget, interval: DefaultProbeInterval, instances: 1, logger: slog.Default()}
	f.backlog.max = DefaultMaxBacklog
	f.clock.start = time.Now()
	for _, opt := range opts {
		if err := opt(f); err != nil {
			return nil, err
		}
	}
	if f.local == nil {
		f.local, _ = NewMemory()
	}
	f.seen = newLastSeen(f.local.maxKeys())
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
func (f *Fallback) Allow(ctx context.Context, key string, cost int, limits ...ratelimit.Limit) (ratelimit.Decision, error) {
	var cbuf [4]*compiled
	cs, err := f.redis.limits.check(key, cost, limits, cbuf[:0])
	if err != nil {
		return ratelimit.Decision{}, err
	}
	for {
		if !f.down.Load() {
			if f.reconciling.Load() {
				if d, err, decided := f.allowLocally(ctx, key, cost, limits, cs, true); decided {
					return d, err
				}
			}
			t := time.Now()
			now := f.clock.at(t)
			d, err := f.redis.decide(ctx, key, cost, limits, cs, f.deadline(now), t.Add(f.budget))
			if err == nil {
				f.seen.put(key, cs, d.Results, now, int64(f.budget/time.Microsecond))
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
				return d, err
			} else {
				f.fail(err)
			}
		}
		if d, err, decided := f.allowLocally(ctx, key, cost, limits, cs, false); decided {
			return d, err
		}
	}
}

// allowLocally decides in process, with the limits divided among the
// instances, while Redis is down; or, with waiting set, while some
// backlogs still wait for Redis, if key's does. Otherwise it decides
// nothing (decided false): Redis is to decide. A key's first decision in
// an outage starts from what Redis last said of it; what it admits is
// recorded for Redis.
func (f *Fallback) allowLocally(ctx context.Context, key string, cost int, limits []ratelimit.Limit, cs []*compiled, waiting bool) (d ratelimit.Decision, err error, decided bool) {
	sh := f.backlog.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var p *pendingKey
	if waiting {
		if p = sh.keys[key]; p == nil || f.down.Load() {
			return d, nil, false
		}
	} else {
		if !f.down.Load() {
			return d, nil, false
		}
		p, _ = sh.get(&f.backlog, key) // nil when the backlog is full
	}
	f.nLocal.Add(1)
	local := make([]ratelimit.Limit, len(limits))
	for i, l := range limits {
		local[i] = f.share(l)
		if cost > local[i].Capacity() {
			return tooCostly(cost, limits, local), nil, true
		}
	}
	now := f.clock.now()
	var ebuf [4]*pendingLimit
	entries := ebuf[:0]
	if p != nil {
		for i, c := range cs {
			e := p.of(c, limits[i])
			if e == nil {
				continue // too many limit states for one key
			}
			if !e.seeded {
				if err := f.seed(ctx, key, c, local[i], now); err != nil {
					return d, err, true
				}
				e.seeded = true
			}
			entries = append(entries, e)
		}
	}
	if d, err = f.local.Allow(ctx, key, cost, local...); err != nil {
		return d, err, true
	}
	if d.Allowed {
		for _, e := range entries {
			e.spend(int64(cost), now)
		}
	}
	for i := range d.Results {
		d.Results[i].Limit = limits[i]
	}
	d.Fallback = true
	return d, nil, true
}

// seed starts key's state under c in process from what Redis last said
// of it: of the units Redis had left, this instance may spend its share.
// When Redis said nothing of it since the last outage, the state in
// process, which has counted everything since, stays as it is.
func (f *Fallback) seed(ctx context.Context, key string, c *compiled, local ratelimit.Limit, now int64) error {
	remaining, ok := f.seen.get(key, c, now)
	if !ok {
		return nil
	}
	if err := f.local.Reset(ctx, key, local); err != nil {
		return err
	}
	n, capacity := int64(f.instances), int64(local.Capacity())
	if spent := capacity - min(capacity, (remaining+n-1)/n); spent > 0 {
		if _, err := f.local.Allow(ctx, key, int(spent), local); err != nil {
			return err
		}
	}
	return nil
}

// Reset implements [ratelimit.Resetter]. It forgets key's state for
// limits in process and on Redis. While Redis is down, the reset is kept
// and applied on Redis when it answers again, before decisions return to
// it, so that a reset made during an outage is never lost and the key is
// not locked out meanwhile: in process, its next request starts afresh at
// once. It returns an error only for invalid input, for an error from
// Redis that is not an outage, or when the backlog is full (see
// [WithMaxBacklog]).
func (f *Fallback) Reset(ctx context.Context, key string, limits ...ratelimit.Limit) error {
	var cbuf [4]*compiled
	cs, err := f.redis.limits.check(key, 1, limits, cbuf[:0])
	if err != nil {
		return err
	}
	local := make([]ratelimit.Limit, len(limits))
	for i, l := range limits {
		local[i] = f.share(l)
	}
	for {
		if !f.down.Load() && f.reconciling.Load() {
			// A key whose backlog waits for Redis is reset there with it.
			sh := f.backlog.shard(key)
			sh.mu.Lock()
			if sh.keys[key] != nil && !f.down.Load() {
				err := f.resetLocally(ctx, sh, key, limits, cs, local)
				sh.mu.Unlock()
				return err
			}
			sh.mu.Unlock()
		}
		if !f.down.Load() {
			rctx, cancel := context.WithTimeout(ctx, f.budget)
			err := f.redis.Reset(rctx, key, limits...)
			cancel()
			if err == nil {
				f.seen.forget(key, cs)
				return f.local.Reset(ctx, key, local...)
			}
			if faultOf(ctx, err) == noFault {
				return err
			}
			f.fail(err)
		}
		sh := f.backlog.shard(key)
		sh.mu.Lock()
		if f.down.Load() {
			err := f.resetLocally(ctx, sh, key, limits, cs, local)
			sh.mu.Unlock()
			return err
		}
		sh.mu.Unlock() // Redis came back meanwhile: reset it there
	}
}

// resetLocally resets key in process and records the reset for Redis.
// The shard is locked.
func (f *Fallback) resetLocally(ctx context.Context, sh *backlogShard, key string, limits []ratelimit.Limit, cs []*compiled, local []ratelimit.Limit) error {
	p, _ := sh.get(&f.backlog, key)
	if p == nil {
		return fmt.Errorf("ratelimit: fallback: Redis is down and the backlogs of %d keys wait for it; this reset cannot be kept (see store.WithMaxBacklog)", f.backlog.max)
	}
	for i, c := range cs {
		if p.of(c, limits[i]) == nil {
			return fmt.Errorf("ratelimit: fallback: Redis is down and key's backlog holds %d limits already; this reset cannot be kept", maxPendingLimits)
		}
	}
	for i, c := range cs {
		e := p.of(c, limits[i])
		e.reset, e.seeded, e.spent = true, true, nil
	}
	return f.local.Reset(ctx, key, local...)
}

// share returns an instance's share of l.
func (f *Fallback) share(l ratelimit.Limit) ratelimit.Limit {
	if f.instances == 1 {
		return l
	}
	if s, ok := f.scaled.get(l); ok {
		return s
	}
	s := l.WithDefaults()
	s.Quota = (s.Quota + f.instances - 1) / f.instances
	if s.Algorithm == ratelimit.TokenBucket {
		s.Burst = (s.Burst + f.instances - 1) / f.instances
	}
	if s.Validate() != nil {
		s = l // a divided token bucket can overflow its fixed point; keep the whole limit
	}
	f.scaled.put(l, s)
	return s
}

// shares remembers the instance's share of up to maxCachedLimits limits;
// past that, shares are worked out per call. The zero value is ready.
type shares struct {
	mu sync.RWMutex
	m  map[ratelimit.Limit]ratelimit.Limit
}

func (c *shares) get(l ratelimit.Limit) (ratelimit.Limit, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.m[l]
	return s, ok
}

func (c *shares) put(l, s ratelimit.Limit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[ratelimit.Limit]ratelimit.Limit)
	}
	if len(c.m) < maxCachedLimits {
		c.m[l] = s
	}
}

// tooCostly denies a request that no instance's share can hold.
func tooCostly(cost int, limits, local []ratelimit.Limit) ratelimit.Decision {
	d := ratelimit.Decision{Fallback: true, Results: make([]ratelimit.Result, len(limits))}
	for i, l := range limits {
		r := ratelimit.Result{Limit: l, Allowed: cost <= local[i].Capacity()}
		if !r.Allowed {
			r.ResetAfter, r.RetryAfter = l.Window, l.Window
		}
		d.Results[i] = r
	}
	return d
}

// Healthy reports whether decisions currently go to Redis.
func (f *Fallback) Healthy() bool { return !f.down.Load() }

// FallbackStats counts a Fallback's events since it was made.
type FallbackStats struct {
	Local         uint64 // decisions made in process
	Failures      uint64 // Redis calls that failed or overran the budget
	Misconfigured uint64 // of those, the ones that failed for a misconfiguration (see ConfigError)
	Recoveries    uint64 // times Redis came back
	Reconciled    uint64 // keys whose in-process resets and admissions were brought to Redis
}

// Stats returns the counts so far.
func (f *Fallback) Stats() FallbackStats {
	return FallbackStats{Local: f.nLocal.Load(), Failures: f.nFailed.Load(), Misconfigured: f.nConfig.Load(), Recoveries: f.nRevived.Load(), Reconciled: f.nCharged.Load()}
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
	return nil
}
