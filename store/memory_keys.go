package store

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// The Memory store's table of keys: shards with a lock each, a state per
// key and limit, and eviction when a shard is full.

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
	expires atomic.Int64 // the latest expiry of its limits and ban; read by eviction
	first   memoryLimit
	ban     *banState // nil until a request under a ban is denied
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
	return s.c == c || s.c != nil && s.c.Suffix == c.Suffix
}

// maxKeys is the most keys the store holds.
func (m *Memory) maxKeys() int { return m.perShard * len(m.shards) }

// len returns the number of keys held.
func (m *Memory) len() int {
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

// find returns the key's state for c, or nil when it has none or its
// state has expired: limit without its changes. The key, if not nil, is
// locked.
func (k *memoryKey) find(c *compiled, now int64) *memoryLimit {
	if k == nil {
		return nil
	}
	for s := &k.first; s != nil && s.c != nil; s = s.next {
		if s.holds(c) {
			if s.expires <= now {
				return nil
			}
			return s
		}
	}
	return nil
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
