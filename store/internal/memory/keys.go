package memory

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// memoryShard holds some of the keys. Its lock guards the map only: a
// key's state has a lock of its own, so that requests for different keys
// of a shard run side by side. The map is keyed by the hash that chose the
// shard, so that a key is hashed once per decision; keys of the same hash
// are chained through memoryKey.collided.
type memoryShard struct {
	mu   sync.RWMutex
	keys map[uint64]*memoryKey
	n    int      // keys held, chained ones included
	_    [24]byte // keeps shards on separate cache lines
}

// memoryKey is one key's state under each limit it was decided with, the
// first in the key, as most keys have one limit.
type memoryKey struct {
	mu       sync.Mutex
	expires  atomic.Int64 // the latest expiry of its limits and ban; read by eviction
	name     string
	collided *memoryKey // the shard's next key of the same hash; the shard's lock guards it
	first    memoryLimit
	ban      *banState // nil until a request under a ban is denied
}

type memoryLimit struct {
	c       *compiled // the limit it was last decided with; nil: unused
	expires int64     // when the state is back to empty
	state   state
	held    *holdState   // a limit charged from usage's reservations; nil: none yet
	next    *memoryLimit // the key's next limit
}

// holds reports whether s keeps the state of c: limits whose Redis keys
// would have the same suffix share state.
func (s *memoryLimit) holds(c *compiled) bool {
	return s.c == c || s.c != nil && s.c.Suffix == c.Suffix
}

// extend keeps the key at least until at. The key is locked.
func (k *memoryKey) extend(at int64) {
	if at > k.expires.Load() {
		k.expires.Store(at)
	}
}

// MaxKeys is the most keys the store holds.
func (m *Store) MaxKeys() int { return m.perShard * len(m.shards) }

// Len returns the number of keys held.
func (m *Store) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.RLock()
		n += sh.n
		sh.mu.RUnlock()
	}
	return n
}

// shard returns key's hash, by which its shard holds it, and the shard.
func (m *Store) shard(key string) (uint64, *memoryShard) {
	h := maphash.String(m.seed, key)
	return h, &m.shards[h&uint64(len(m.shards)-1)]
}

// key returns key's state, made, and room made for it, if need be.
func (m *Store) key(key string, now int64) *memoryKey {
	h, sh := m.shard(key)
	return sh.key(h, key, now, m.perShard)
}

// key is Store.key for key of hash h, among capacity keys.
func (sh *memoryShard) key(h uint64, key string, now int64, capacity int) *memoryKey {
	sh.mu.RLock()
	k := sh.find(h, key)
	sh.mu.RUnlock()
	if k != nil {
		return k
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if k := sh.find(h, key); k != nil {
		return k
	}
	if sh.n >= capacity {
		sh.evict(now)
	}
	k = &memoryKey{name: strings.Clone(key), collided: sh.keys[h]} // not the caller's buffer, which may hold more
	sh.keys[h] = k
	sh.n++
	return k
}

// lookup returns key's state, or nil when the store holds none.
func (m *Store) lookup(key string) *memoryKey {
	h, sh := m.shard(key)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.find(h, key)
}

// find returns key, of hash h, or nil. The shard is locked.
func (sh *memoryShard) find(h uint64, key string) *memoryKey {
	for k := sh.keys[h]; k != nil; k = k.collided {
		if k.name == key {
			return k
		}
	}
	return nil
}

// remove drops k, whose hash is h. The shard is locked.
func (sh *memoryShard) remove(h uint64, k *memoryKey) {
	if first := sh.keys[h]; first == k {
		if k.collided == nil {
			delete(sh.keys, h)
		} else {
			sh.keys[h] = k.collided
		}
	} else {
		p := first
		for p.collided != k {
			p = p.collided
		}
		p.collided = k.collided
	}
	k.collided = nil
	sh.n--
}

const evictSample = 32 // keys evict looks at

// evict removes the expired keys among a sample of the shard, or else
// the one that expires soonest. The shard is locked. A request still
// deciding an evicted key finishes on its old state.
func (sh *memoryShard) evict(now int64) {
	var soonest *memoryKey
	var soonestHash uint64
	var soonestAt int64
	freed, seen := false, 0
	for h, k := range sh.keys { // map order is random
		for k != nil && seen < evictSample {
			next := k.collided
			if at := k.expires.Load(); at <= now {
				sh.remove(h, k)
				freed = true
			} else if soonest == nil || at < soonestAt {
				soonest, soonestHash, soonestAt = k, h, at
			}
			k, seen = next, seen+1
		}
		if seen == evictSample {
			break
		}
	}
	if !freed && soonest != nil {
		sh.remove(soonestHash, soonest)
	}
}

// find returns the key's state for c, or nil when it has none or it has
// expired: limit without its changes. The key, if not nil, is locked.
func (k *memoryKey) find(c *compiled, now int64) *memoryLimit {
	if s := k.entry(c); s != nil && s.expires > now {
		return s
	}
	return nil
}

// entry returns the key's state for c, expired or not (its holds outlive
// it), or nil. The key, if not nil, is locked.
func (k *memoryKey) entry(c *compiled) *memoryLimit {
	if k == nil {
		return nil
	}
	for s := &k.first; s != nil && s.c != nil; s = s.next {
		if s.holds(c) {
			return s
		}
	}
	return nil
}

// limit returns the key's state for c, empty if expired. The key is locked.
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
