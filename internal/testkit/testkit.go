// Package testkit holds what the module's tests share: sets of limits
// built or the test failed, and a buffer a logger writes to.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// LimitsOf returns limits as a set, failing t if they are invalid. A test
// builds a set once and reuses it, as a Limiter does: the Redis store's
// deny cache knows a request's limits by their set.
func LimitsOf(t testing.TB, limits ...ratelimit.Limit) *ratelimit.Limits {
	t.Helper()
	set, err := ratelimit.NewLimits(limits...)
	if err != nil {
		t.Fatalf("NewLimits(%v): %v", limits, err)
	}
	return set
}

// WithBan returns limits as a set with ban b, failing t if invalid.
func WithBan(t testing.TB, b ratelimit.Ban, limits ...ratelimit.Limit) *ratelimit.Limits {
	t.Helper()
	set, err := LimitsOf(t, limits...).WithBan(b)
	if err != nil {
		t.Fatalf("WithBan(%v): %v", b, err)
	}
	return set
}

// A Buffer is a bytes.Buffer safe for a logger's concurrent writes.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A Clock is a pinned clock, safe for concurrent use: its time moves
// only by Advance, which then tells moved, when set (a miniredis's
// SetTime, so that its TIME and key expiry follow).
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	moved func(time.Time)
}

// NewClock returns a Clock at now that tells moved, if not nil, of each Advance.
func NewClock(now time.Time, moved func(time.Time)) *Clock {
	return &Clock{now: now, moved: moved}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	if c.moved != nil {
		c.moved(c.now)
	}
}

// Pinned reports that time stands still between calls to Advance.
func (c *Clock) Pinned() bool { return true }

// AlgorithmNamed returns the algorithm whose String is name.
func AlgorithmNamed(t testing.TB, name string) ratelimit.Algorithm {
	t.Helper()
	for a := range 4 {
		if ratelimit.Algorithm(a).String() == name {
			return ratelimit.Algorithm(a)
		}
	}
	t.Fatalf("no algorithm is named %q", name)
	return 0
}
