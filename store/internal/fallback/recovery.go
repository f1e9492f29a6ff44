package fallback

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// fail counts a Redis call failing with err and sends decisions to memory.
func (f *Fallback) fail(err error) {
	f.nFailed.Add(1)
	f.lastErr.Store(&failure{err: err, at: time.Now()})
	if f.fault(context.Background(), err) == Misconfigured {
		f.nConfig.Add(1)
	}
	f.markDown(err)
}

func (f *Fallback) markDown(err error) {
	if !f.down.CompareAndSwap(false, true) {
		return
	}
	now := time.Now().UnixNano()
	f.downAt.Store(now)
	f.movedAt.Store(now)
	f.nDown.Add(1)
	switch why := f.primary.Explain(context.Background(), err); {
	case why.Fault == Misconfigured:
		f.downLogged.Store(f.logMisconfig(err, time.Now()))
	case why.Cause == "timeout":
		// Maybe go-redis waited to dial again (a refused connection): the
		// prober's first round, which dials once, says why (see logDown).
		f.untold.Store(&failure{err: err, at: time.Now()})
	default:
		f.logDown(err, nil, time.Now())
	}
	if f.hook != nil {
		f.hook(false, err)
	}
	f.mu.Lock()
	closed := f.closed
	if !closed && f.stop == nil {
		f.stop = make(chan struct{})
		f.wg.Add(1)
		go f.probe(f.stop)
	}
	f.mu.Unlock()
	if e := f.untold.Load(); closed && e != nil && f.untold.CompareAndSwap(e, nil) {
		f.logDown(e.err, nil, time.Now()) // no prober will
	}
}

// checkAtStart sends decisions to memory if Redis is misconfigured.
func (f *Fallback) checkAtStart() {
	defer f.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), f.callTimeout())
	defer cancel()
	if _, err := f.primary.Probe(ctx, Check, f.clock.now); f.fault(context.Background(), err) == Misconfigured {
		f.fail(err)
	}
}

// probe checks Redis every interval until it can decide, brings the
// backlog to it, and hands decisions back; or until stop closes.
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
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), f.callTimeout())
		offset, err := f.primary.Probe(ctx, Recover, f.clock.now)
		cancel()
		if err == nil {
			f.clock.measuredAs(offset)
		}
		logged := f.logMisconfig(err, time.Now())
		if e := f.untold.Swap(nil); e != nil {
			if f.fault(context.Background(), err) == Misconfigured {
				f.downLogged.Store(logged) // the ERROR says why
			} else {
				f.logDown(e.err, err, time.Now())
			}
		}
		if err != nil {
			f.lastErr.Store(&failure{err: err, at: time.Now()})
		}
		if probed := f.probed.Load(); probed != nil {
			(*probed)(start, err == nil)
		}
		if err == nil {
			f.markUp()
			err = f.reconcile()
		}
		if err == nil {
			f.mu.Lock()
			if f.stop == stop {
				f.stop = nil
			}
			f.mu.Unlock()
			return
		}
	}
}

// callTimeout bounds each call of the prober's.
func (f *Fallback) callTimeout() time.Duration { return max(f.budget, f.interval) }

// markUp sends decisions back to Redis, but for keys not yet reconciled.
func (f *Fallback) markUp() {
	f.reconciling.Store(true)
	f.down.Store(false)
	f.movedAt.Store(time.Now().UnixNano())
	f.nRevived.Add(1)
	if f.downLogged.Load() { // else this outage repeats one logged lately
		f.logger.LogAttrs(context.Background(), slog.LevelInfo, "ratelimit: Redis answers again; deciding with Redis",
			slog.Duration("down_for", time.Duration(time.Now().UnixNano()-f.downAt.Load())))
	}
	if f.hook != nil {
		f.hook(true, nil)
	}
}

// reconcile brings the backlog to Redis, reconcileBatch keys a round
// trip; each key goes back to Redis once its backlog is found empty under
// its shard's lock, so that a key under steady load still gets there. A
// key refused for a reason other than an outage (a foreign value) is
// dropped and logged: retrying would keep it from Redis for good. It
// returns Redis's error, if it fails meanwhile. One runs at a time.
func (f *Fallback) reconcile() error {
	f.reconciler.Lock()
	defer f.reconciler.Unlock()
	offset := f.clock.offset.Load()
	for {
		var keys []string
		for i := range f.backlog.shards {
			sh := &f.backlog.shards[i]
			sh.mu.Lock()
			keys = slices.AppendSeq(keys, maps.Keys(sh.keys))
			sh.mu.Unlock()
		}
		for len(keys) > 0 {
			n := min(len(keys), reconcileBatch)
			if err := f.handBack(keys[:n:n], offset); err != nil {
				return err
			}
			keys = keys[n:]
		}
		if f.backlog.keys.Load() == 0 {
			f.reconciling.Store(false)
			return nil
		} // else keys were decided aside meanwhile
	}
}

// settle brings the backlogs of keys decided aside to Redis, in the
// background, unless the prober or an earlier settle is at it.
func (f *Fallback) settle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.stop != nil || f.settling {
		return
	}
	f.settling = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			err := f.readClock()
			if err == nil {
				err = f.reconcile() // an error marked Redis down: the prober takes over
			}
			f.mu.Lock()
			// Keys decided aside since reconcile looked are brought now.
			if err != nil || f.closed || f.backlog.keys.Load() == 0 {
				f.settling = false
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
		}
	}()
}

// readClock reads Redis's clock unless it has been read: what was decided
// aside is brought at Redis's times, and a time on an unread clock would
// look too old to count. A failure marks Redis down, as reconcile's do.
func (f *Fallback) readClock() error {
	if f.clock.measured.Load() != 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.callTimeout())
	defer cancel()
	offset, err := f.primary.Probe(ctx, ReadClock, f.clock.now)
	if err != nil {
		f.fail(err)
		return err
	}
	f.clock.measuredAs(offset)
	return nil
}

const reconcileBatch = 256 // keys whose backlogs go in one round trip

// handBack brings keys' backlogs to Redis until each key is back there.
func (f *Fallback) handBack(keys []string, offset int64) error {
	for len(keys) > 0 {
		if f.down.Load() {
			return errors.New("ratelimit: fallback: Redis failed again")
		}
		var charges []*Charge
		for _, key := range keys {
			if c := f.backlog.shard(key).takeKey(&f.backlog, key); c != nil {
				charges = append(charges, c)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.callTimeout())
		f.primary.Charge(ctx, charges, offset)
		cancel()
		keys = keys[:0]
		var failed error
		for _, c := range charges {
			switch {
			case f.fault(context.Background(), c.Err).failing():
				// Redis may have run it: it goes again, known by its ID.
				f.backlog.putBack(c)
				failed = c.Err
			case c.Err != nil:
				f.logger.LogAttrs(context.Background(), slog.LevelError, "ratelimit: fallback: what was decided in process for a key could not be brought to Redis", slog.String("error", c.Err.Error()))
			default:
				f.nCharged.Add(1)
			}
			for _, e := range c.Limits {
				// Redis's answers from before the outage are stale.
				f.seen.forget(c.Key, []spec.Limit{*e.Limit})
			}
			keys = append(keys, c.Key) // to take what came meanwhile
		}
		if failed != nil {
			f.fail(failed)
			return failed
		}
	}
	return nil
}
