package ratelimit

import "fmt"

// Algorithm selects how a [Limit] counts requests. The zero value is
// [SlidingWindow].
type Algorithm uint8

const (
	// SlidingWindow is the sliding window counter: the window is cut into
	// slots of Limit.Precision, and a request is admitted when the slots
	// that overlap the last Window hold fewer than Quota. Memory per key is
	// one small counter per slot (Window/Precision of them). It never admits
	// more than Quota in any span of Window−Precision; across a full Window
	// it may admit up to one slot's worth more (see the README). It is the
	// default: smooth, cheap and close to exact.
	SlidingWindow Algorithm = iota

	// FixedWindow counts requests in a window that opens with the first
	// request and closes Window later. It is the cheapest algorithm, but a
	// client can pass up to 2×Quota across the boundary between two windows.
	FixedWindow

	// SlidingLog keeps the time of every admitted request for one Window.
	// It is exact: never more than Quota in any span of Window. Memory per
	// key grows with Quota, so Quota is capped at [MaxSlidingLogQuota].
	SlidingLog

	// TokenBucket holds up to Limit.Burst tokens and refills at Quota per
	// Window. Each request takes cost tokens; a full bucket lets a burst
	// through, then the rate holds. It starts full.
	TokenBucket
)

var algorithmNames = [...]string{
	SlidingWindow: "sliding-window",
	FixedWindow:   "fixed-window",
	SlidingLog:    "sliding-log",
	TokenBucket:   "token-bucket",
}

// String returns the algorithm's name, for example "token-bucket".
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

func (a Algorithm) valid() bool { return int(a) < len(algorithmNames) }
