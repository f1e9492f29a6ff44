package bounded

import "sync"

// A Map holds, for each key K, the V that Make made for it, up to Max
// keys. Past Max, a new key is first replaced by what Overflow makes of
// it (a route or limit name turned into "other"), whose V is kept like
// any other; with Overflow nil, the V of a new key is made on each Get
// and not kept. Make runs at most once for each key kept, with the Map
// locked.
//
// Its zero value is not usable: set Max and Make, and Overflow if a key
// past Max has one, before the first Get, and change none of them after.
// It is safe for concurrent use.
type Map[K comparable, V any] struct {
	Max      int
	Make     func(K) V
	Overflow func(K) K

	mu sync.RWMutex
	m  map[K]V
}

// Get returns the V of k, made on first use.
func (m *Map[K, V]) Get(k K) V {
	m.mu.RLock()
	v, ok := m.m[k]
	m.mu.RUnlock()
	if ok {
		return v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.m[k]; ok {
		return v
	}
	if m.m == nil {
		m.m = map[K]V{}
	}
	if len(m.m) >= m.Max {
		if m.Overflow == nil {
			return m.Make(k)
		}
		k = m.Overflow(k)
		if v, ok := m.m[k]; ok {
			return v
		}
	}
	v = m.Make(k)
	m.m[k] = v
	return v
}
