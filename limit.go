package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// Bounds on a [Limit]'s fields; see its documentation.
const (
	maxSlidingLogQuota = 100_000
	maxSlots           = 1000
	maxQuota           = spec.MaxQuota
	maxNameLength      = 64
	defaultSlots       = 10
)

// A Limit says how many requests (or units of cost) a key may make per
// Window, and with which [Algorithm]. Build one with [PerSecond],
// [PerMinute] or [Per], or as a struct literal, and refine it:
//
//	ratelimit.PerMinute(100)                                   // sliding window counter
//	ratelimit.PerMinute(5).Using(ratelimit.SlidingLog).Named("login")
//	ratelimit.PerSecond(10).Using(ratelimit.TokenBucket).WithBurst(50)
//	ratelimit.Per(10_000, 24*time.Hour).Using(ratelimit.FixedWindow)
//	ratelimit.Limit{Quota: 600, Window: time.Hour, Precision: time.Minute}
//
// A Limit is a plain value: compare it with ==, copy it, use it as a map
// key. It is checked when it joins a [Limits] (see [NewLimits]); the zero
// Limit is not valid.
type Limit struct {
	// Algorithm decides how requests are counted. Zero is SlidingWindow.
	Algorithm Algorithm

	// Quota is how many units a key may spend per Window: the limit for
	// windows and logs, the refill rate for a token bucket. From 1 to
	// 2^53−1, so that every count is exact in Redis's Lua; at most 100,000
	// for a SlidingLog, which keeps one entry per admitted unit.
	Quota int

	// Window is the period Quota applies to: at least 1ms, in whole
	// milliseconds.
	Window time.Duration

	// Burst is a TokenBucket's capacity: how many units may pass at once
	// after a quiet period. Zero means Quota. Other algorithms leave it
	// zero.
	Burst int

	// Precision is a SlidingWindow's slot width, in whole microseconds. It
	// must divide Window, into at most 1000 slots (each decision reads
	// every slot). Zero means Window/10. Other algorithms leave it zero.
	Precision time.Duration

	// Name names the limit in RateLimit-Policy headers, logs and errors:
	// printable ASCII, at most 64 bytes. Empty means a name made of the
	// other fields. A name is a label only: renaming a limit keeps its
	// counters.
	Name string
}

// Per returns a limit of n per window, counted with the default
// algorithm, SlidingWindow.
func Per(n int, window time.Duration) Limit { return Limit{Quota: n, Window: window} }

// PerSecond returns a limit of n per second.
func PerSecond(n int) Limit { return Per(n, time.Second) }

// PerMinute returns a limit of n per minute.
func PerMinute(n int) Limit { return Per(n, time.Minute) }

// Using returns a copy of l counted with algorithm a.
func (l Limit) Using(a Algorithm) Limit { l.Algorithm = a; return l }

// WithBurst returns a copy of l with capacity burst (TokenBucket only).
func (l Limit) WithBurst(burst int) Limit { l.Burst = burst; return l }

// Named returns a copy of l named name.
func (l Limit) Named(name string) Limit { l.Name = name; return l }

// String describes l, for example "login: 5 per 1m, sliding-log" or
// "10 per 1s, token-bucket, burst 20".
func (l Limit) String() string {
	var b strings.Builder
	if l.Name != "" {
		b.WriteString(l.Name)
		b.WriteString(": ")
	}
	b.WriteString(strconv.Itoa(l.Quota))
	b.WriteString(" per ")
	b.WriteString(formatDuration(l.Window))
	b.WriteString(", ")
	b.WriteString(l.Algorithm.String())
	if l.Burst != 0 {
		b.WriteString(", burst ")
		b.WriteString(strconv.Itoa(l.Burst))
	}
	if l.Precision != 0 {
		b.WriteString(", precision ")
		b.WriteString(formatDuration(l.Precision))
	}
	return b.String()
}

// formatDuration writes d like [time.Duration.String] without trailing
// zero units: "1m" rather than "1m0s", "1h30m" rather than "1h30m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// withDefaults returns l with its defaulted zero fields filled in: Burst
// for a TokenBucket, Precision for a SlidingWindow.
func (l Limit) withDefaults() Limit {
	switch l.Algorithm {
	case TokenBucket:
		if l.Burst == 0 {
			l.Burst = l.Quota
		}
	case SlidingWindow:
		if l.Precision == 0 {
			l.Precision = l.Window / defaultSlots
		}
	}
	return l
}

// capacity is the most units l holds at once: Burst (or its default) for
// a TokenBucket, Quota otherwise.
func (l Limit) capacity() int {
	if l.Algorithm == TokenBucket && l.Burst != 0 {
		return l.Burst
	}
	return l.Quota
}

// check returns the first invalid field and what is wrong with it, or
// two empty strings.
func (l Limit) check() (field, problem string) {
	switch {
	case !l.Algorithm.valid():
		return "Algorithm", fmt.Sprintf("is unknown: %d", l.Algorithm)
	case l.Quota < 1:
		return "Quota", fmt.Sprintf("must be at least 1, got %d", l.Quota)
	case l.Quota > maxQuota:
		return "Quota", fmt.Sprintf("must be at most %d, got %d", maxQuota, l.Quota)
	case l.Window < time.Millisecond:
		return "Window", fmt.Sprintf("must be at least 1ms, got %v", l.Window)
	case l.Window%time.Millisecond != 0:
		return "Window", fmt.Sprintf("must be a whole number of milliseconds, got %v", l.Window)
	case l.Burst != 0 && l.Algorithm != TokenBucket:
		return "Burst", fmt.Sprintf("is only used by token-bucket, not %v; leave it zero", l.Algorithm)
	case l.Precision != 0 && l.Algorithm != SlidingWindow:
		return "Precision", fmt.Sprintf("is only used by sliding-window, not %v; leave it zero", l.Algorithm)
	case len(l.Name) > maxNameLength:
		return "Name", fmt.Sprintf("is %d bytes long; at most %d are allowed", len(l.Name), maxNameLength)
	case strings.IndexFunc(l.Name, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0:
		return "Name", fmt.Sprintf("%q holds a byte outside printable ASCII, which a header cannot carry", l.Name)
	}
	switch l.Algorithm {
	case SlidingLog:
		if l.Quota > maxSlidingLogQuota {
			return "Quota", fmt.Sprintf("must be at most %d for sliding-log, got %d: the log keeps one entry per request; use sliding-window (SlidingWindow), which needs a few counters per key", maxSlidingLogQuota, l.Quota)
		}
	case SlidingWindow:
		p := l.withDefaults().Precision
		switch {
		case p <= 0:
			return "Precision", fmt.Sprintf("must be positive, got %v", p)
		case p%time.Microsecond != 0:
			return "Precision", fmt.Sprintf("must be a whole number of microseconds, got %v", p)
		case p > l.Window:
			return "Precision", fmt.Sprintf("must not exceed Window %v, got %v", l.Window, p)
		case l.Window%p != 0:
			return "Precision", fmt.Sprintf("must divide Window %v evenly, got %v", l.Window, p)
		case l.Window/p > maxSlots:
			return "Precision", fmt.Sprintf("makes %d slots (Window/Precision); at most %d are allowed", l.Window/p, maxSlots)
		}
	case TokenBucket:
		burst := l.capacity()
		if burst < 1 {
			return "Burst", fmt.Sprintf("must be at least 1, got %d", l.Burst)
		}
		if burst > maxQuota {
			return "Burst", fmt.Sprintf("must be at most %d, got %d", maxQuota, burst)
		}
		if _, _, _, ok := spec.TokenUnits(int64(l.Window/time.Microsecond), int64(l.Quota), int64(burst)); !ok {
			return "Burst", fmt.Sprintf("%d is too large for a refill of %d per %s: the bucket's level would not fit in 53 bits", burst, l.Quota, formatDuration(l.Window))
		}
	}
	return "", ""
}

// compile returns the integers the stores need of a valid l.
func (l Limit) compile() spec.Limit {
	l = l.withDefaults()
	return spec.Compile(uint8(l.Algorithm), l.Quota, l.Window, l.Precision, l.Burst)
}
