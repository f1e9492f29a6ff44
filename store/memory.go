package store

import (
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
)

// MemoryOptions configures [NewMemory]. The zero value means all defaults.
type MemoryOptions struct {
	// MaxKeys bounds the number of keys held. Zero means 100,000.
	MaxKeys int

	// Clock, when set, is read for the time instead of the system's
	// monotonic clock, for tests. The store never lets its time go back: an
	// earlier time counts as the latest seen.
	Clock func() time.Time
}

// NewMemory returns an empty [ratelimit.Store] that keeps its counters in
// this process, deciding as the Redis scripts do: for a single instance,
// for tests, or under a [Fallback]. A new key finding MemoryOptions.MaxKeys
// held evicts expired keys, else one that expires soon, so a flood of new
// keys can make others forget their counts early (see
// docs/production.md#the-memory-store). It is safe for concurrent use.
func NewMemory(opts MemoryOptions) (ratelimit.Store, error) {
	m, err := memory.New(opts.internal())
	if err != nil {
		return nil, err
	}
	return m, nil
}

// internal returns opts as the Memory store's package takes them.
func (opts MemoryOptions) internal() memory.Options {
	return memory.Options{MaxKeys: opts.MaxKeys, Clock: opts.Clock}
}
