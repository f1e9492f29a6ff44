package bounded

import (
	"sync"
	"sync/atomic"
)

// A Map holds, for each key K, the V that Make made for it, up to Max
// keys. Past Max, a new key is replaced by what Overflow makes of it (a
// route or limit name turned into "other"), whose V is kept like any
// other; with Overflow nil, the Map forgets every key and starts afresh
// with the new one: a cache of the keys in use now, whose V can be made
// again. Make runs at most once per key kept, with the Map locked; a key
// kept is read without a lock, as from a sync.Map: every request reads it.
//
// Its zero value is not usable: set Max and Make, and Overflow if a key
// past Max has one, before the first Get, and change none of them after.
// It is safe for concurrent use.
type Map[K comparable, V any] struct {
	Max      int
	Make     func(K) V
	Overflow func(K) K

	mu sync.Mutex // held while a value is made and kept
	m  sync.Map   // K to V
	n  atomic.Int64
}

// Get returns the V of k, made on first use.
func (m *Map[K, V]) Get(k K) V {
	if v, ok := m.m.Load(k); ok {
		return v.(V)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.m.Load(k); ok {
		return v.(V)
	}
	if m.n.Load() >= int64(m.Max) {
		if m.Overflow == nil {
			m.m.Clear()
			m.n.Store(0)
		} else {
			k = m.Overflow(k)
			if v, ok := m.m.Load(k); ok {
				return v.(V)
			}
		}
	}
	v := m.Make(k)
	m.m.Store(k, v)
	m.n.Add(1)
	return v
}

// Range calls f for each key kept and its V until f returns false, as sync.Map's Range.
func (m *Map[K, V]) Range(f func(K, V) bool) {
	m.m.Range(func(k, v any) bool { return f(k.(K), v.(V)) })
}
