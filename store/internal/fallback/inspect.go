package fallback

import (
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// For the store package's tests over a real Redis; nothing else calls these.

// Reconciling reports whether some keys' backlogs still wait for the primary.
func (f *Fallback) Reconciling() bool { return f.reconciling.Load() }

// Aside returns how many requests were decided aside (see localMode).
func (f *Fallback) Aside() uint64 { return f.nAside.Load() }

// OnProbe has fn called after each round of the prober, with when the
// round started and whether it found the primary able to decide.
func (f *Fallback) OnProbe(fn func(start time.Time, ok bool)) { f.probed.Store(&fn) }

// ClockRead reports whether the primary's clock has been read.
func (f *Fallback) ClockRead() bool { return f.clock.measured.Load() != 0 }

// AssumeClock takes the primary's clock as read, equal to the Fallback's.
func (f *Fallback) AssumeClock() { f.clock.measuredAs(0) }

// Now returns the time on the Fallback's clock (µs).
func (f *Fallback) Now() int64 { return f.clock.now() }

// Seen returns what the primary last said of key under c: the units it
// had left, if it said anything that still holds at now.
func (f *Fallback) Seen(key string, c *spec.Limit, now int64) (remaining int64, ok bool) {
	return f.seen.get(key, c, now)
}

// Sizes returns how many keys have a backlog, its bound, the limit states
// key's backlog holds, and how many keys the in-process store holds.
func (f *Fallback) Sizes(key string) (backlogKeys, maxBacklog int64, keyLimits, localKeys int) {
	sh := f.backlog.shard(key)
	sh.mu.Lock()
	if p := sh.keys[key]; p != nil {
		keyLimits = len(p.limits)
	}
	sh.mu.Unlock()
	return f.backlog.keys.Load(), f.backlog.max, keyLimits, f.local.Len()
}

// Settings returns the budget, probe interval and instances, defaults applied.
func (f *Fallback) Settings() (budget, interval time.Duration, instances int) {
	return f.budget, f.interval, f.instances
}

// Fail sends decisions in process as a primary's call failing with err would.
func (f *Fallback) Fail(err error) { f.fail(err) }
