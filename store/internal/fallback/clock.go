package fallback

import (
	"context"
	"sync/atomic"
	"time"
)

// clock is a Fallback's time, µs on the monotonic clock since it was made,
// and Redis's against it: Redis must know when requests were admitted.
type clock struct {
	start     time.Time
	offset    atomic.Int64 // Redis's clock minus this one (µs)
	measured  atomic.Int64 // when offset was last measured; 0: never
	measuring atomic.Bool
}

func (c *clock) now() int64 { return c.at(time.Now()) }

func (c *clock) at(t time.Time) int64 { return int64(t.Sub(c.start)/time.Microsecond) + 1 }

// clockAge is how long a measure of Redis's clock is trusted.
const clockAge = int64(time.Minute / time.Microsecond)

// measuredAs records the primary's clock read now as offset.
func (c *clock) measuredAs(offset int64) {
	c.offset.Store(offset)
	c.measured.Store(c.now())
}

// deadline returns when, on Redis's clock, a decision sent at now is no
// longer to be made, its caller having decided it in process; 0 until
// Redis's clock is read, which is done again in the background each minute.
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
	// A quarter of the budget more, for the clock's error: Redis must
	// never refuse a request for lateness while its caller still waits. A
	// decision in that margin counts twice: it may deny early, never admit
	// too many.
	return now + f.clock.offset.Load() + int64(f.budget*5/4/time.Microsecond)
}
