package ratelimit

import (
	"context"
	"net/http"
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

// DefaultStoreKeys returns the store key of r under a policy whose keys
// start with prefix, built both ways a Limiter with the default KeyFunc
// may build it: in one piece (remoteKeyer.storeKey) and from the KeyFunc's
// key (policy.storeKey).
func DefaultStoreKeys(r *http.Request, prefix string) (onePiece string, err1 error, twoPieces string, err2 error) {
	onePiece, err1 = remoteKeyer.storeKey(r, prefix)
	if key, err := remoteIP(r); err != nil {
		err2 = err
	} else {
		twoPieces = (&policy{prefix: prefix}).storeKey(key)
	}
	return onePiece, err1, twoPieces, err2
}
