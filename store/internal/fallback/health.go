package fallback

import (
	"context"
	"time"
)

// Health is store.FallbackHealth, which documents each field.
type Health struct {
	Decisions                                                       string
	Since                                                           time.Time
	LastError                                                       error
	LastErrorKind                                                   string
	LastErrorAt                                                     time.Time
	Waiting                                                         int64
	Local, Failures, Misconfigured, Outages, Recoveries, Reconciled uint64
}

// failure is a Redis call's error and when it happened.
type failure struct {
	err error
	at  time.Time
}

// Health is store.Fallback.Health's snapshot, documented there.
func (f *Fallback) Health() Health {
	h := Health{
		Decisions:     "redis",
		Since:         time.Unix(0, f.movedAt.Load()).UTC(),
		Waiting:       f.backlog.keys.Load(),
		Local:         f.nLocal.Load(),
		Failures:      f.nFailed.Load(),
		Misconfigured: f.nConfig.Load(),
		Outages:       f.nDown.Load(),
		Recoveries:    f.nRevived.Load(),
		Reconciled:    f.nCharged.Load(),
	}
	if f.down.Load() {
		h.Decisions = "in_process"
	}
	if e := f.lastErr.Load(); e != nil {
		h.LastError, h.LastErrorAt, h.LastErrorKind = e.err, e.at.UTC(), f.primary.Explain(context.Background(), e.err).Kind()
	}
	return h
}

// Kind names w's kind in words safe to serve, never the error's own text.
func (w Failure) Kind() string {
	switch {
	case w.Fault == Misconfigured && len(w.Problems) > 0:
		return "misconfigured: " + w.Problems[0].What
	case w.Cause == "timeout":
		return "timeout"
	}
	return "unavailable"
}
