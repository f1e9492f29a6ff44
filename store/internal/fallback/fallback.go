// Package fallback is the engine of store.Fallback, which documents it: it
// decides with a [Primary] (the Redis store) and, while that fails, in
// process (with the Memory store).
//
// Words: a decision in process is local, under this instance's share of
// each limit; the backlog is what was decided in process, per key, on its
// way to the primary; a charge is one key's backlog sent in one run; the
// prober checks a down primary every interval and hands decisions back
// once the backlog has reached it (reconciling).
package fallback

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
)

const (
	defaultBudget        = 50 * time.Millisecond
	defaultProbeInterval = 500 * time.Millisecond
	defaultMaxBacklog    = 100_000 // keys
)

// Options configures [New], as store.FallbackOptions documents.
type Options struct {
	Budget        time.Duration
	ProbeInterval time.Duration
	Instances     int
	Local         memory.Options
	MaxBacklog    int
	HealthHook    func(up bool, err error)
	Logger        *slog.Logger
}

// Fallback is store.Fallback's engine, safe for concurrent use.
type Fallback struct {
	primary   Primary
	local     *memory.Store
	budget    time.Duration
	interval  time.Duration
	instances int
	hook      func(up bool, err error)
	logger    *slog.Logger
	probed    atomic.Pointer[func(start time.Time, ok bool)] // tests: after each probe

	down        atomic.Bool
	reconciling atomic.Bool // some keys' backlogs still wait for the primary
	mu          sync.Mutex
	stop        chan struct{} // closed to stop the prober; nil when none runs
	wg          sync.WaitGroup
	closed      bool
	settling    bool                             // a settle goroutine runs
	reconciler  sync.Mutex                       // held by the one reconcile under way
	logged      bounded.Map[string, *loggedLine] // see logOnce; under mu
	untold      atomic.Pointer[failure]          // a timeout, for the prober to log with its cause
	downLogged  atomic.Bool                      // this outage's line was logged, not held back

	// Health's counts; nAside: those of nLocal decided aside (see localMode).
	nLocal, nAside, nFailed, nConfig, nRevived, nCharged, nDown atomic.Uint64

	downAt  atomic.Int64 // unix ns when the primary was last marked down
	movedAt atomic.Int64 // unix ns when decisions last moved, or the Fallback was made
	lastErr atomic.Pointer[failure]

	seen    *lastSeen
	backlog backlog
	clock   clock
}

var _ ratelimit.Store = (*Fallback)(nil)

// New returns a Fallback deciding with p, and checks p once in the
// background. Options are taken as valid: store.NewFallback checks them.
func New(p Primary, opts Options) (*Fallback, error) {
	f := &Fallback{
		primary:   p,
		budget:    cmp.Or(opts.Budget, defaultBudget),
		interval:  cmp.Or(opts.ProbeInterval, defaultProbeInterval),
		instances: cmp.Or(opts.Instances, 1),
		hook:      opts.HealthHook,
		logger:    cmp.Or(opts.Logger, slog.Default()),
	}
	f.backlog.max = int64(cmp.Or(opts.MaxBacklog, defaultMaxBacklog))
	f.logged = bounded.Map[string, *loggedLine]{Max: maxLoggedLines, Make: func(string) *loggedLine { return new(loggedLine) }}
	f.clock.start = time.Now()
	f.movedAt.Store(f.clock.start.UnixNano())
	var err error
	if f.local, err = memory.New(opts.Local); err != nil {
		return nil, fmt.Errorf("store.NewFallback: FallbackOptions.Local: %w", err)
	}
	f.seen = newLastSeen(f.local.MaxKeys(), int64(f.budget/time.Microsecond))
	f.wg.Add(1)
	go f.checkAtStart()
	return f, nil
}

// Allow decides with the primary, or in process while it is down or
// key's backlog waits for it.
func (f *Fallback) Allow(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	c := Call{Key: key, Cost: cost, Limits: given, Set: set}
	for {
		if !f.down.Load() {
			if f.reconciling.Load() {
				if d, decided := f.allowLocally(&c, waiting); decided {
					return d, nil
				}
			}
			t := time.Now()
			now := f.clock.at(t)
			d, err := f.primary.Decide(ctx, Call{Key: key, Cost: cost, Limits: given, Set: set, Deadline: f.deadline(now), Until: t.Add(f.budget)})
			if err == nil {
				if d.Banned == 0 { // a ban's answer says nothing of the limits
					f.seen.put(key, set.Limits, d.Results(), now)
				}
				if !f.down.Load() {
					return d, nil
				}
				// Redis was marked down meanwhile: decisions in process
				// may have started from an older count, so this one is
				// decided there too. Counted twice, it may deny early but
				// never admits too many.
			} else if fault := f.fault(ctx, err); fault == Waited {
				// Its time ran out waiting for another request's answer:
				// decided aside, or as in the outage once Redis is down.
				if d, decided := f.allowLocally(&c, aside); decided {
					f.nAside.Add(1)
					f.settle()
					return d, nil
				}
				continue
			} else if !fault.failing() {
				return d, err
			} else {
				f.fail(err)
			}
		}
		if d, decided := f.allowLocally(&c, outage); decided {
			return d, nil
		}
	}
}

// End charges usage on the primary, or in process as Allow decides.
func (f *Fallback) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, admitted ratelimit.Decision) (ratelimit.Decision, error) {
	given, set, err := limitset.CheckEnd(key, usage, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	c := Call{Key: key, Limits: given, Set: set}
	slot := admitted.Slot // a slot or holds Redis gave: given back there
	if admitted.Fallback {
		// A slot or holds of this instance's share, given back here; the
		// usage is charged wherever the end is decided.
		share := set.Share(f.instances)
		f.local.Release(key, slot, share)
		if !f.local.Settle(key, slot, 0, share) {
			usage = 0 // ended before: charged then
		}
		slot = ""
	}
	return f.run(ctx, func(mode localMode) (ratelimit.Decision, bool) {
		d, ended := f.endLocally(&c, usage, mode)
		if ended && slot != "" {
			f.primary.Forget(slot) // not given back there: it lapses
		}
		return d, ended
	}, func(rctx context.Context) (ratelimit.Decision, error) {
		return f.primary.End(rctx, Call{Key: key, Limits: given, Set: set, Deadline: f.deadline(f.clock.now())}, usage, slot)
	})
}

// Peek answers as the next Allow would, on the primary or in process.
func (f *Fallback) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	c := Call{Key: key, Cost: cost, Limits: given, Set: set}
	return f.run(ctx, func(mode localMode) (ratelimit.Decision, bool) {
		return f.peekLocally(&c, mode)
	}, func(rctx context.Context) (ratelimit.Decision, error) {
		return f.primary.Peek(rctx, c)
	})
}

// run is End's, Peek's and Reset's loop: remote asks the primary, unless
// local answers in process (see localMode).
func (f *Fallback) run(ctx context.Context, local func(localMode) (ratelimit.Decision, bool),
	remote func(context.Context) (ratelimit.Decision, error)) (ratelimit.Decision, error) {
	for {
		if !f.down.Load() {
			if f.reconciling.Load() {
				if d, ok := local(waiting); ok {
					return d, nil
				}
			}
			rctx, cancel := context.WithTimeout(ctx, f.budget)
			d, err := remote(rctx)
			cancel()
			if err == nil || !f.fault(ctx, err).failing() {
				return d, err
			}
			f.fail(err)
		}
		if d, ok := local(outage); ok {
			return d, nil
		}
	}
}

// Reset forgets key's state in process and on the primary; while the
// primary is down, the reset waits in the backlog.
func (f *Fallback) Reset(ctx context.Context, key string, limits *ratelimit.Limits) error {
	_, set, err := limitset.Check(key, 1, limits)
	if err != nil {
		return err
	}
	local := set.Share(f.instances)
	var lerr error
	_, err = f.run(ctx, func(mode localMode) (d ratelimit.Decision, done bool) {
		done, lerr = f.resetLocally(key, set, local, mode)
		return d, done
	}, func(rctx context.Context) (d ratelimit.Decision, err error) {
		if err = f.primary.Reset(rctx, key, limits); err == nil {
			f.seen.forget(key, set.Limits)
			f.local.Forget(key, local, true)
			f.backlog.shard(key).dropAside(&f.backlog, key) // admitted before the reset
		}
		return d, err
	})
	return cmp.Or(err, lerr)
}

// Close stops the prober and waits for the Fallback's goroutines.
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
