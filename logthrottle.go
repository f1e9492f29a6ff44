package ratelimit

import (
	"sync/atomic"
	"time"
)

// Kinds of log lines a Limiter throttles separately.
const (
	logStoreError = iota
	logRequestError
	logDryRun
	logKinds
)

// logThrottle lets at most one line of each kind through per second, and
// counts the ones it holds back. The zero value is ready to use.
type logThrottle struct {
	last    [logKinds]atomic.Int64 // unix nanoseconds of the last line
	dropped [logKinds]atomic.Int64
}

// allow reports whether a line of kind may be logged now, and how many
// were held back since the last one.
func (t *logThrottle) allow(kind int) (ok bool, dropped int64) {
	now := time.Now().UnixNano()
	last := t.last[kind].Load()
	if now-last < int64(time.Second) || !t.last[kind].CompareAndSwap(last, now) {
		t.dropped[kind].Add(1)
		return false, 0
	}
	return true, t.dropped[kind].Swap(0)
}
