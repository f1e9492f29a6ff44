package ratelimit

import (
	"context"
	"time"
)

// SetsKept returns how many sets of WithLimitsFunc l keeps checked, for
// tests.
func SetsKept(l *Limiter) int {
	l.sets.mu.RLock()
	defer l.sets.mu.RUnlock()
	return len(l.sets.sets)
}

// SetWaitClock makes Wait read the time from now and sleep with sleep
// until the returned function restores the real clock. Tests that call it
// must not run in parallel.
func SetWaitClock(nowFunc func() time.Time, sleepFunc func(context.Context, time.Duration) error) (restore func()) {
	oldNow, oldSleep := now, sleep
	now, sleep = nowFunc, sleepFunc
	return func() { now, sleep = oldNow, oldSleep }
}
