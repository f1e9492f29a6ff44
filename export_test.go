package ratelimit

// SetsKept returns how many sets of WithLimitsFunc l keeps checked, for
// tests.
func SetsKept(l *Limiter) int {
	l.sets.mu.RLock()
	defer l.sets.mu.RUnlock()
	return len(l.sets.sets)
}
