package ratelimitprom

// This module's copy of the bounded label-set map (each metrics module
// keeps its own: a module uses another only through its public API).

import "sync"

// A seriesMap holds, for each label set K, the V made for it, up to Max of
// them; a new label set past Max is first replaced by what Overflow makes
// of it (a route or limit name turned into "other"). Its zero value is
// not usable: set Max, Make and Overflow. It is safe for concurrent use.
type seriesMap[K comparable, V any] struct {
	Max      int
	Make     func(K) V
	Overflow func(K) K

	mu sync.RWMutex
	m  map[K]V
}

// Get returns the V of k, made on first use.
func (s *seriesMap[K, V]) Get(k K) V {
	s.mu.RLock()
	v, ok := s.m[k]
	s.mu.RUnlock()
	if ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		return v
	}
	if s.m == nil {
		s.m = map[K]V{}
	}
	if len(s.m) >= s.Max {
		k = s.Overflow(k)
		if v, ok := s.m[k]; ok {
			return v
		}
	}
	v = s.Make(k)
	s.m[k] = v
	return v
}
