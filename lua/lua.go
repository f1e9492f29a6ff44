// Package lua holds the Redis scripts of the four rate-limit algorithms.
//
// Each algorithm lives in its own file (fixed_window.lua, sliding_log.lua,
// sliding_window.lua, token_bucket.lua) and registers itself with the
// driver in decide.lua, which checks every limit of a request and then
// commits to all or none of them. [Script] joins the driver with the
// algorithms a request needs into one script, so a decision is a single
// atomic EVALSHA.
package lua

import (
	_ "embed"
	"strings"
)

var (
	//go:embed decide.lua
	decide string

	// FixedWindow is the fixed window counter; code "f".
	//go:embed fixed_window.lua
	FixedWindow string

	// SlidingLog is the sliding window log; code "l".
	//go:embed sliding_log.lua
	SlidingLog string

	// SlidingWindow is the sliding window counter; code "s".
	//go:embed sliding_window.lua
	SlidingWindow string

	// TokenBucket is the token bucket; code "t".
	//go:embed token_bucket.lua
	TokenBucket string

	// Probe checks that Redis can decide; see probe.lua.
	//go:embed probe.lua
	Probe string

	// Check names the commands Redis refuses the store; see check.lua.
	//go:embed check.lua
	Check string

	//go:embed charge.lua
	charge string
)

// Script returns the source of a script that decides requests whose
// limits use only the given algorithms (FixedWindow, SlidingLog,
// SlidingWindow, TokenBucket). KEYS, ARGV and the reply are described in
// decide.lua.
func Script(algorithms ...string) string {
	var b strings.Builder
	b.WriteString(decide)
	for _, a := range algorithms {
		b.WriteString(a)
	}
	b.WriteString("return decide()\n")
	return b.String()
}

// Charge returns the source of the script that brings to Redis what a
// fallback decided in process; KEYS, ARGV and the reply are described in
// charge.lua.
func Charge() string {
	return decide + FixedWindow + SlidingLog + SlidingWindow + TokenBucket + charge + "return charge()\n"
}
