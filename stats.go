package ratelimit

import "sync/atomic"

// Stats counts a Limiter's decisions by outcome since it was built. Read it
// with [Limiter.Stats] and export it as you like, for example as Prometheus
// counters through CounterFunc. It is a snapshot: a plain value.
type Stats struct {
	Allowed     uint64 // requests the limits let through
	Denied      uint64 // requests denied; in dry-run mode, those that would have been
	StoreErrors uint64 // requests not decided because the store failed
	Canceled    uint64 // requests whose context ended (the client left) before the store decided
	BadRequests uint64 // requests not decided for want of a key, or with an invalid cost
	Fallback    uint64 // decisions made by an in-process fallback; also counted as allowed or denied
}

type counters struct {
	allowed, denied, storeErrors, canceled, badRequests, fallback atomic.Uint64
}

// Stats returns the counts so far. It is safe to call while requests are
// decided; each count is read atomically, not all of them at once.
func (l *Limiter) Stats() Stats {
	c := &l.counts
	return Stats{
		Allowed:     c.allowed.Load(),
		Denied:      c.denied.Load(),
		StoreErrors: c.storeErrors.Load(),
		Canceled:    c.canceled.Load(),
		BadRequests: c.badRequests.Load(),
		Fallback:    c.fallback.Load(),
	}
}
