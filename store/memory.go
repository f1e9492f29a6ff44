package store

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// DefaultMaxKeys is how many keys a [Memory] store holds unless
// [WithMaxKeys] says otherwise.
const DefaultMaxKeys = 100_000

// Memory is a [ratelimit.Store] that keeps its counters in this process:
// for a service with a single instance, for tests, or as the fallback of
// a Redis store (see [NewFallback]). It implements the four algorithms
// with the semantics of the Redis scripts, step for step; a differential
// test holds the two stores to the same decisions.
//
// Its memory is bounded. It holds at most MaxKeys keys (see [WithMaxKeys]);
// a key's state is dropped as soon as it expires. When a new key finds the
// store full, it first evicts keys whose state has expired and, if none
// has, the key of a small random sample whose state would expire soonest.
// So a flood of new keys can make other keys forget their counts early,
// but the store never denies everyone and never grows without bound. Per
// key, a sliding log holds up to Quota timestamps and a sliding window
// Window/Precision slots.
//
// Keys are spread over shards with a lock each, so it scales across cores.
// Memory is safe for concurrent use.
type Memory struct {
	shards   []memoryShard
	perShard int
	seed     maphash.Seed
	now      func() int64 // µs, never going back
	limits   limitCache
}

var (
	_ ratelimit.Store    = (*Memory)(nil)
	_ ratelimit.Resetter = (*Memory)(nil)
)

// memoryShard holds some of the keys. Its lock guards the map only: a
// key's state has a lock of its own, so that requests for different keys
// of a shard, and all lookups of known keys, run side by side.
type memoryShard struct {
	mu   sync.RWMutex
	keys map[string]*memoryKey
	_    [32]byte // keeps shards on separate cache lines
}

// memoryKey is one key's state under each limit it was decided with: a
// list whose first element lives in the key, since most keys have one
// limit.
type memoryKey struct {
	mu      sync.Mutex
	expires atomic.Int64 // the latest expiry of its limits; read by eviction
	first   memoryLimit
}

type memoryLimit struct {
	c       *compiled // the limit it was last decided with; nil: unused
	expires int64     // when the state is back to empty
	state   state
	next    *memoryLimit // the key's next limit
}

// holds reports whether s keeps the state of c: limits whose Redis keys
// would have the same suffix share state.
func (s *memoryLimit) holds(c *compiled) bool {
	return s.c == c || s.c != nil && s.c.suffix == c.suffix
}

// MemoryOption configures [NewMemory].
type MemoryOption func(*Memory) error

// WithMaxKeys bounds the number of keys; the default is
// [DefaultMaxKeys].
func WithMaxKeys(n int) MemoryOption {
	return func(m *Memory) error {
		if n < 1 {
			return fmt.Errorf("%w: store.WithMaxKeys(%d): must be at least 1", ratelimit.ErrInvalid, n)
		}
		m.perShard = n
		return nil
	}
}

// WithClock makes the store read the time from now instead of the
// system's monotonic clock, for tests. The store never lets its time go
// back: an earlier time counts as the latest seen.
func WithClock(now func() time.Time) MemoryOption {
	return func(m *Memory) error {
		if now == nil {
			return fmt.Errorf("%w: store.WithClock: the function is nil", ratelimit.ErrInvalid)
		}
		var mu sync.Mutex
		var last int64
		m.now = func() int64 {
			t := now().UnixMicro()
			mu.Lock()
			defer mu.Unlock()
			last = max(last, t)
			return last
		}
		return nil
	}
}

// NewMemory returns an empty in-process store.
func NewMemory(opts ...MemoryOption) (*Memory, error) {
	start := time.Now()
	m := &Memory{
		perShard: DefaultMaxKeys,
		seed:     maphash.MakeSeed(),
		now:      func() int64 { return start.UnixMicro() + int64(time.Since(start)/time.Microsecond) },
	}
	for _, opt := range opts {
		if err := opt(m); err != nil {
			return nil, err
		}
	}
	// Shards of at least 64 keys, so that eviction's sample is drawn from
	// a real crowd; up to 8 per core.
	n := 1
	for n*2 <= 8*runtime.GOMAXPROCS(0) && n*2 <= m.perShard/64 {
		n *= 2
	}
	maxKeys := m.perShard
	m.shards = make([]memoryShard, n)
	m.perShard = max(maxKeys/n, 1)
	for i := range m.shards {
		m.shards[i].keys = make(map[string]*memoryKey)
	}
	return m, nil
}

// Allow implements [ratelimit.Store].
func (m *Memory) Allow(ctx context.Context, key string, cost int, limits ...ratelimit.Limit) (ratelimit.Decision, error) {
	if len(limits) == 1 {
		return m.allowOne(key, cost, limits[0])
	}
	var cbuf [4]*compiled
	cs, err := m.limits.check(key, cost, limits, cbuf[:0])
	if err != nil {
		return ratelimit.Decision{}, err
	}
	now, c64 := m.now(), int64(cost)
	d := ratelimit.Decision{Allowed: true, Results: make([]ratelimit.Result, len(limits))}
	type outcome struct {
		ok                      bool
		remaining, retry, reset int64
	}
	var obuf [4]outcome
	out := obuf[:0]
	var sbuf [4]*memoryLimit
	states := sbuf[:0]
	k := m.shard(key).key(key, now, m.perShard)
	k.mu.Lock()
	for _, c := range cs {
		s := k.limit(c, now)
		states = append(states, s)
		var o outcome
		o.ok, o.remaining, o.retry = s.state.of(c).check(c, now, c64)
		out = append(out, o)
		d.Allowed = d.Allowed && o.ok
	}
	latest := k.expires.Load()
	for i, s := range states {
		if d.Allowed {
			out[i].reset = s.state.of(cs[i]).commit(cs[i], now, c64)
			out[i].remaining -= c64
			s.expires = now + keyTTL(cs[i], out[i].reset)
			latest = max(latest, s.expires)
		} else {
			out[i].reset = s.state.of(cs[i]).settle(cs[i], now)
		}
	}
	k.expires.Store(latest)
	k.mu.Unlock()
	for i, o := range out {
		d.Results[i] = ratelimit.Result{Limit: limits[i], Allowed: o.ok, Remaining: int(o.remaining), ResetAfter: us(o.reset), RetryAfter: us(o.retry)}
	}
	return d, nil
}

// allowOne is Allow for the common request with one limit, in fewer
// steps.
func (m *Memory) allowOne(key string, cost int, l ratelimit.Limit) (ratelimit.Decision, error) {
	c := m.limits.get(l)
	if !c.valid || key == "" || len(key) > ratelimit.MaxKeyLength || cost < 1 || int64(cost) > c.capacity {
		return ratelimit.Decision{}, ratelimit.CheckRequest(key, cost, []ratelimit.Limit{l})
	}
	now, c64 := m.now(), int64(cost)
	k := m.shard(key).key(key, now, m.perShard)
	k.mu.Lock()
	s := k.limit(c, now)
	a := s.state.of(c)
	ok, remaining, retry := a.check(c, now, c64)
	var reset int64
	if ok {
		reset = a.commit(c, now, c64)
		remaining -= c64
		s.expires = now + keyTTL(c, reset)
		if s.expires > k.expires.Load() {
			k.expires.Store(s.expires)
		}
	} else {
		reset = a.settle(c, now)
	}
	k.mu.Unlock()
	d := ratelimit.Decision{Allowed: ok, Results: make([]ratelimit.Result, 1)}
	d.Results[0] = ratelimit.Result{Limit: l, Allowed: ok, Remaining: int(remaining), ResetAfter: us(reset), RetryAfter: us(retry)}
	return d, nil
}

// Reset implements [ratelimit.Resetter].
func (m *Memory) Reset(ctx context.Context, key string, limits ...ratelimit.Limit) error {
	if err := ratelimit.CheckRequest(key, 1, limits); err != nil {
		return err
	}
	sh := m.shard(key)
	sh.mu.RLock()
	k, ok := sh.keys[key]
	sh.mu.RUnlock()
	if !ok {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range limits {
		c := m.limits.get(l)
		for s := &k.first; s != nil; s = s.next {
			if s.holds(c) {
				s.expires = 0 // empty from now on
			}
		}
	}
	return nil
}

// maxKeys is the most keys the store holds.
func (m *Memory) maxKeys() int { return m.perShard * len(m.shards) }

// Len returns the number of keys held.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.RLock()
		n += len(sh.keys)
		sh.mu.RUnlock()
	}
	return n
}

func (m *Memory) shard(key string) *memoryShard {
	return &m.shards[maphash.String(m.seed, key)&uint64(len(m.shards)-1)]
}

// key returns key's state, creating it, and making room for it, if need
// be.
func (sh *memoryShard) key(key string, now int64, capacity int) *memoryKey {
	sh.mu.RLock()
	k, ok := sh.keys[key]
	sh.mu.RUnlock()
	if ok {
		return k
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if k, ok := sh.keys[key]; ok {
		return k
	}
	if len(sh.keys) >= capacity {
		sh.evict(now)
	}
	k = &memoryKey{}
	sh.keys[key] = k
	return k
}

// evictSample is how many keys evict looks at.
const evictSample = 32

// evict removes the expired keys among a sample of the shard, or, if none
// has expired, the sampled key that expires soonest. The shard is locked.
// A request still deciding an evicted key finishes on its old state, as if
// the eviction had come just after it.
func (sh *memoryShard) evict(now int64) {
	var soonest string
	first, freed, seen := true, false, 0
	var soonestAt int64
	for name, k := range sh.keys { // map order is random
		if at := k.expires.Load(); at <= now {
			delete(sh.keys, name)
			freed = true
		} else if first || at < soonestAt {
			soonest, soonestAt, first = name, at, false
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if !freed && !first {
		delete(sh.keys, soonest)
	}
}

// limit returns the key's state for c, empty if it has expired. The key
// is locked.
func (k *memoryKey) limit(c *compiled, now int64) *memoryLimit {
	s := &k.first
	for s.c != nil && !s.holds(c) {
		if s.next == nil {
			s.next = new(memoryLimit)
		}
		s = s.next
	}
	if s.c == nil || s.expires <= now {
		s.state.reset(c)
	}
	s.c = c
	return s
}

func us(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
