package store

import (
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
)

// MemoryOptions configures [NewMemory]. The zero value means every
// default.
type MemoryOptions struct {
	// MaxKeys bounds the number of keys held. Zero means 100,000.
	MaxKeys int

	// Clock, when set, is read for the time instead of the system's
	// monotonic clock, for tests. The store never lets its time go back: an
	// earlier time counts as the latest seen.
	Clock func() time.Time
}

// NewMemory returns an empty [ratelimit.Store] that keeps its counters in
// this process: for a service with a single instance, for tests, or as the
// fallback of a Redis store (see [NewFallback]). It implements the
// algorithms with the semantics of the Redis scripts, step for step; a
// differential test holds the two stores to the same decisions.
//
// Its memory is bounded: at most MemoryOptions.MaxKeys keys, each dropped
// as soon as its state expires. A new key finding the store full first
// evicts expired keys, else the key of a small random sample that would
// expire soonest: a flood of new keys can make other keys forget their
// counts early, but the store never denies everyone nor grows without
// bound. Per key, a sliding log holds up to Quota timestamps and a sliding
// window Window/Precision slots; a key decided under limits with a ban
// (see [ratelimit.Ban]) keeps its ban state with them, as long as it
// matters.
//
// Keys are spread over shards with a lock each, so it scales across cores.
// The store is safe for concurrent use.
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
