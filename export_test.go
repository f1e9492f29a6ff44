package ratelimit

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// SetsKept returns how many sets of WithLimitsFunc l keeps checked, for
// tests.
func SetsKept(l *Limiter) int {
	l.setsMu.RLock()
	defer l.setsMu.RUnlock()
	return len(l.sets)
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
// start with prefix, built both ways a Limiter may build it: with the
// default key, appended in place, and from the zero IPKey's KeyFunc.
func DefaultStoreKeys(r *http.Request, prefix string) (inPlace string, err1 error, fromKeyFunc string, err2 error) {
	var b strings.Builder
	inPlace, err1 = storeKey(r, nil, prefix, &b)
	key, err := IPKey{}.KeyFunc()
	if err != nil {
		panic(err)
	}
	fromKeyFunc, err2 = storeKey(r, key, prefix, &b)
	return inPlace, err1, fromKeyFunc, err2
}
