package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
// Each decision has a time budget (see [WithBudget]). When Redis errs or
// overruns it, the request is decided in process, Redis is marked down, and
// later requests skip it: they are decided in process at once. One
// goroutine then pings Redis every probe interval (see [WithProbeInterval])
// and, as soon as Redis answers, decisions go back to it. While Redis is
// down, each instance enforces the limits on its own; [WithInstances]
// divides them to keep the total near the limit. Decisions made in process
// have Decision.Fallback set. A request costing more than a divided
// limit's capacity is denied while Redis is down.
//
// Errors that are not about Redis being unavailable are returned, not
// hidden: invalid input, a canceled request, a key holding a foreign value.
//
// Fallback is safe for concurrent use. Close stops its goroutine.
type Fallback struct {
	redis     *Redis
	local     *Memory
	budget    time.Duration
	interval  time.Duration
	instances int
	hook      func(up bool, err error)
	logger    *slog.Logger

	down   atomic.Bool
	mu     sync.Mutex
	stop   chan struct{} // closed to stop the prober; nil when none runs
	wg     sync.WaitGroup
	closed bool

	scaled   sync.Map // ratelimit.Limit -> ratelimit.Limit
	nLocal   atomic.Uint64
	nFailed  atomic.Uint64
	nRevived atomic.Uint64
	lastLog  atomic.Int64 // unix ns of the last line about Redis's health
}

var _ ratelimit.Store = (*Fallback)(nil)

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

// WithHealthHook calls hook when Redis goes down (up false, with the
// error) and when it comes back (up true, nil). It runs on the goroutine
// that saw the change and must not block.
func WithHealthHook(hook func(up bool, err error)) FallbackOption {
	return func(f *Fallback) error {
		f.hook = hook
		return nil
	}
}

// WithFallbackLogger sets where Redis going down and coming back is
// logged; the default is slog.Default(). A change is logged at most once
// a second.
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
// is unavailable. r's client must honor context deadlines
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
	for _, opt := range opts {
		if err := opt(f); err != nil {
			return nil, err
		}
	}
	if f.local == nil {
		f.local, _ = NewMemory()
	}
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
	if err := ratelimit.CheckRequest(key, cost, limits); err != nil {
		return ratelimit.Decision{}, err
	}
	if !f.down.Load() {
		rctx, cancel := context.WithTimeout(ctx, f.budget)
		d, err := f.redis.Allow(rctx, key, cost, limits...)
		cancel()
		if err == nil || !unavailable(ctx, err) {
			return d, err
		}
		f.nFailed.Add(1)
		f.markDown(err)
	}
	return f.allowLocally(ctx, key, cost, limits)
}

// unavailable reports whether err means Redis could not decide, rather
// than that the request was canceled or its key holds a foreign value.
// Network errors and timeouts are outages; of the errors Redis itself
// replies, only those saying it cannot serve now are.
func unavailable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // the caller gave up; Redis may be fine
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true
	}
	msg := reply.Error()
	for _, prefix := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "OOM", "MISCONF", "NOREPLICAS", "ERR max number of clients"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// allowLocally decides in process, with the limits divided among the
// instances.
func (f *Fallback) allowLocally(ctx context.Context, key string, cost int, limits []ratelimit.Limit) (ratelimit.Decision, error) {
	f.nLocal.Add(1)
	local := make([]ratelimit.Limit, len(limits))
	for i, l := range limits {
		local[i] = f.share(l)
		if cost > local[i].Capacity() {
			return tooCostly(cost, limits, local), nil
		}
	}
	d, err := f.local.Allow(ctx, key, cost, local...)
	if err != nil {
		return d, err
	}
	for i := range d.Results {
		d.Results[i].Limit = limits[i]
	}
	d.Fallback = true
	return d, nil
}

// share returns an instance's share of l.
func (f *Fallback) share(l ratelimit.Limit) ratelimit.Limit {
	if f.instances == 1 {
		return l
	}
	if s, ok := f.scaled.Load(l); ok {
		return s.(ratelimit.Limit)
	}
	s := l.WithDefaults()
	s.Quota = (s.Quota + f.instances - 1) / f.instances
	if s.Algorithm == ratelimit.TokenBucket {
		s.Burst = (s.Burst + f.instances - 1) / f.instances
	}
	if s.Validate() != nil {
		s = l // a divided token bucket can overflow its fixed point; keep the whole limit
	}
	f.scaled.Store(l, s)
	return s
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

func (f *Fallback) markDown(err error) {
	if !f.down.CompareAndSwap(false, true) {
		return
	}
	f.log(slog.LevelWarn, "ratelimit: Redis unavailable; deciding in process until it answers", slog.String("error", err.Error()))
	if f.hook != nil {
		f.hook(false, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.stop != nil {
		return
	}
	f.stop = make(chan struct{})
	f.wg.Add(1)
	go f.probe(f.stop)
}

// probe pings Redis every interval until it answers or stop closes.
func (f *Fallback) probe(stop chan struct{}) {
	defer f.wg.Done()
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(f.budget, f.interval))
		err := f.redis.Ping(ctx)
		cancel()
		if err == nil {
			f.mu.Lock()
			if f.stop == stop {
				f.stop = nil
			}
			f.mu.Unlock()
			f.down.Store(false)
			f.nRevived.Add(1)
			f.log(slog.LevelInfo, "ratelimit: Redis answers again; deciding with Redis")
			if f.hook != nil {
				f.hook(true, nil)
			}
			return
		}
	}
}

// Healthy reports whether decisions currently go to Redis.
func (f *Fallback) Healthy() bool { return !f.down.Load() }

// FallbackStats counts a Fallback's events since it was made.
type FallbackStats struct {
	Local      uint64 // decisions made in process
	Failures   uint64 // Redis calls that failed or overran the budget
	Recoveries uint64 // times Redis came back
}

// Stats returns the counts so far.
func (f *Fallback) Stats() FallbackStats {
	return FallbackStats{Local: f.nLocal.Load(), Failures: f.nFailed.Load(), Recoveries: f.nRevived.Load()}
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

// log writes a line about Redis's health, at most one a second.
func (f *Fallback) log(level slog.Level, msg string, attrs ...slog.Attr) {
	now, last := time.Now().UnixNano(), f.lastLog.Load()
	if now-last < int64(time.Second) || !f.lastLog.CompareAndSwap(last, now) {
		return
	}
	f.logger.LogAttrs(context.Background(), level, msg, attrs...)
}
