package fallback

import (
	"context"
	"sync/atomic"
	"time"
)

// clock is a Fallback's time, in µs on the monotonic clock since the
// Fallback was made, and Redis's time against it: the Fallback records
// when it admitted requests in process, and Redis must know those times.
type clock struct {
	start     time.Time
	offset    atomic.Int64 // Redis's clock minus this one (µs)
	measured  atomic.Int64 // when offset was last measured; 0: never
	measuring atomic.Bool
}

func (c *clock) now() int64 { return c.at(time.Now()) }

// at returns t on the clock.
func (c *clock) at(t time.Time) int64 { return int64(t.Sub(c.start)/time.Microsecond) + 1 }

// clockAge is how long a measure of Redis's clock is trusted.
const clockAge = int64(time.Minute / time.Microsecond)

// measured records the primary's clock read now as offset (see
// Primary.Probe).
func (c *clock) measuredAs(offset int64) {
	c.offset.Store(offset)
	c.measured.Store(c.now())
}

// deadline returns the time on Redis's clock after which a decision sent
// at now (on f's clock) must not be made, because the caller will have
// decided it in process: the budget from now, and a margin. It is 0
// (none) until Redis's clock has been read; it is read again, in the
// background, once a minute.
func (f *Fallback) deadline(now int64) int64 {
	at := f.clock.measured.Load()
	if (at == 0 || now-at > clockAge) && f.clock.measuring.CompareAndSwap(false, true) {
		f.mu.Lock()
		if f.closed {
			f.clock.measuring.Store(false)
		} else {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer f.clock.measuring.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), f.callTimeout())
				defer cancel()
				if offset, err := f.primary.Probe(ctx, ReadClock, f.clock.now); err == nil {
					f.clock.measuredAs(offset)
				}
			}()
		}
		f.mu.Unlock()
	}
	if at == 0 {
		return 0
	}
	// A quarter of the budget more, for the error of the clock's measure:
	// a caller must never see Redis refuse its request for lateness while
	// it still waits, since Redis, answering, is not down. A decision made
	// in that margin after its caller gave up counts twice: later
	// decisions may deny slightly early, never admit too many.
	return now + f.clock.offset.Load() + int64(f.budget*5/4/time.Microsecond)
}
