package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bounds on a [Limit], enforced by [Limit.Validate].
const (
	// MaxSlidingLogQuota is the largest Quota a SlidingLog limit accepts.
	// A sliding log stores one entry per admitted request, so a larger
	// quota means megabytes per key; use SlidingWindow instead.
	MaxSlidingLogQuota = 100_000

	// MaxSlots is the largest number of slots (Window/Precision) a
	// SlidingWindow limit accepts. Each decision reads every slot.
	MaxSlots = 1000

	// MaxQuota bounds Quota (and Burst) so that every count, and the token
	// bucket's fixed-point level, is exact in the 53-bit integers of
	// Redis's Lua.
	MaxQuota = 1<<53 - 1

	defaultSlots = 10
)

// A Limit says how many requests (or units of cost) a key may make per
// Window, and with which [Algorithm]. Build one with [PerSecond],
// [PerMinute], [PerHour], [PerDay] or [Per], then refine it:
//
//	ratelimit.PerMinute(100)                                   // sliding window counter
//	ratelimit.PerMinute(5).Using(ratelimit.SlidingLog).Named("login")
//	ratelimit.PerSecond(10).Using(ratelimit.TokenBucket).WithBurst(50)
//	ratelimit.PerDay(10_000).Using(ratelimit.FixedWindow)
//
// A Limit is a plain value: compare it with ==, copy it, use it as a map
// key. The zero value is not valid; [Limit.Validate] says why.
type Limit struct {
	// Algorithm decides how requests are counted. Zero is SlidingWindow.
	Algorithm Algorithm

	// Quota is how many units a key may spend per Window: the limit for
	// windows and logs, the refill rate for a token bucket. At least 1.
	Quota int

	// Window is the period Quota applies to: at least 1ms, in whole
	// milliseconds.
	Window time.Duration

	// Burst is a TokenBucket's capacity: how many units may pass at once
	// after a quiet period. Zero means Quota. Other algorithms must leave
	// it zero.
	Burst int

	// Precision is a SlidingWindow's slot width. It must divide Window,
	// and Window/Precision may not exceed MaxSlots. Zero means Window/10.
	// Other algorithms must leave it zero.
	Precision time.Duration

	// Name names the limit in RateLimit-Policy headers and logs. Empty
	// means a name derived from the other fields.
	Name string

	// Scope separates counters: limits with different scopes never count
	// into the same place, even for the same key. A [Limiter] sets it to
	// its namespace and route; set it yourself when calling a Store
	// directly for two purposes with the same key. Printable ASCII, at most
	// 128 bytes, without '{' or '}'. Empty is a scope of its own.
	Scope string
}

// Per returns a limit of n per window with the default algorithm,
// SlidingWindow.
func Per(n int, window time.Duration) Limit { return Limit{Quota: n, Window: window} }

// PerSecond returns a limit of n per second.
func PerSecond(n int) Limit { return Per(n, time.Second) }

// PerMinute returns a limit of n per minute.
func PerMinute(n int) Limit { return Per(n, time.Minute) }

// PerHour returns a limit of n per hour.
func PerHour(n int) Limit { return Per(n, time.Hour) }

// PerDay returns a limit of n per 24 hours.
func PerDay(n int) Limit { return Per(n, 24*time.Hour) }

// Using returns a copy of l counted with algorithm a.
func (l Limit) Using(a Algorithm) Limit { l.Algorithm = a; return l }

// WithBurst returns a copy of l with capacity burst (TokenBucket only).
func (l Limit) WithBurst(burst int) Limit { l.Burst = burst; return l }

// WithPrecision returns a copy of l with slot width p (SlidingWindow only).
func (l Limit) WithPrecision(p time.Duration) Limit { l.Precision = p; return l }

// Named returns a copy of l named name.
func (l Limit) Named(name string) Limit { l.Name = name; return l }

// WithDefaults returns l with its defaulted zero fields filled in: Burst
// for a TokenBucket, Precision for a SlidingWindow.
func (l Limit) WithDefaults() Limit {
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

// Capacity is the most units l can hold at once: Burst (or its default)
// for a TokenBucket, Quota otherwise. [Result.Remaining] never exceeds
// it, and a request costing more can never pass.
func (l Limit) Capacity() int {
	if l.Algorithm == TokenBucket && l.Burst != 0 {
		return l.Burst
	}
	return l.Quota
}

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
	b.WriteString(FormatDuration(l.Window))
	b.WriteString(", ")
	b.WriteString(l.Algorithm.String())
	if l.Burst != 0 {
		b.WriteString(", burst ")
		b.WriteString(strconv.Itoa(l.Burst))
	}
	if l.Precision != 0 {
		b.WriteString(", precision ")
		b.WriteString(FormatDuration(l.Precision))
	}
	return b.String()
}

// FormatDuration writes d like [time.Duration.String] without trailing
// zero units: "1m" rather than "1m0s", "1h30m" rather than "1h30m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Validate reports, as an error wrapping [ErrInvalid] and naming the
// field, why l cannot be used; nil if it can.
func (l Limit) Validate() error {
	if field, problem := l.check(); field != "" {
		return fmt.Errorf("%w: Limit.%s %s (%v)", ErrInvalid, field, problem, l)
	}
	return nil
}

// check returns the first invalid field and what is wrong with it, or
// two empty strings.
func (l Limit) check() (field, problem string) {
	switch {
	case !l.Algorithm.valid():
		return "Algorithm", fmt.Sprintf("is unknown: %d", l.Algorithm)
	case l.Quota < 1:
		return "Quota", fmt.Sprintf("must be at least 1, got %d", l.Quota)
	case l.Quota > MaxQuota:
		return "Quota", fmt.Sprintf("must be at most %d, got %d", MaxQuota, l.Quota)
	case l.Window < time.Millisecond:
		return "Window", fmt.Sprintf("must be at least 1ms, got %v", l.Window)
	case l.Window%time.Millisecond != 0:
		return "Window", fmt.Sprintf("must be a whole number of milliseconds, got %v", l.Window)
	case l.Burst != 0 && l.Algorithm != TokenBucket:
		return "Burst", fmt.Sprintf("is only used by token-bucket, not %v; leave it zero", l.Algorithm)
	case l.Precision != 0 && l.Algorithm != SlidingWindow:
		return "Precision", fmt.Sprintf("is only used by sliding-window, not %v; leave it zero", l.Algorithm)
	case len(l.Scope) > 128:
		return "Scope", fmt.Sprintf("is %d bytes long; at most 128 are allowed", len(l.Scope))
	case strings.IndexFunc(l.Scope, func(r rune) bool { return r < 0x20 || r > 0x7e || r == '{' || r == '}' }) >= 0:
		return "Scope", fmt.Sprintf("%q holds a byte outside printable ASCII, or a brace", l.Scope)
	}
	switch l.Algorithm {
	case SlidingLog:
		if l.Quota > MaxSlidingLogQuota {
			return "Quota", fmt.Sprintf("must be at most %d for sliding-log, got %d: the log keeps one entry per request; use sliding-window (SlidingWindow), which needs a few counters per key", MaxSlidingLogQuota, l.Quota)
		}
	case SlidingWindow:
		p := l.WithDefaults().Precision
		switch {
		case p < 0:
			return "Precision", fmt.Sprintf("must be positive, got %v", p)
		case p%time.Microsecond != 0:
			return "Precision", fmt.Sprintf("must be a whole number of microseconds, got %v", p)
		case p > l.Window:
			return "Precision", fmt.Sprintf("must not exceed Window %v, got %v", l.Window, p)
		case l.Window%p != 0:
			return "Precision", fmt.Sprintf("must divide Window %v evenly, got %v", l.Window, p)
		case l.Window/p > MaxSlots:
			return "Precision", fmt.Sprintf("makes %d slots (Window/Precision); at most %d are allowed", l.Window/p, MaxSlots)
		}
	case TokenBucket:
		burst := l.Capacity()
		if burst < 1 {
			return "Burst", fmt.Sprintf("must be at least 1, got %d", l.Burst)
		}
		if burst > MaxQuota {
			return "Burst", fmt.Sprintf("must be at most %d, got %d", MaxQuota, burst)
		}
		if _, _, capacity, ok := l.TokenUnits(); !ok || capacity > MaxQuota {
			return "Burst", fmt.Sprintf("%d is too large for a refill of %d per %s: the bucket's level would not fit in 53 bits", burst, l.Quota, FormatDuration(l.Window))
		}
	}
	return "", ""
}

// TokenUnits returns the fixed-point scale of a token bucket's level, so
// that refilling is exact integer arithmetic: a token is unit units, the
// bucket refills rate units per microsecond, and a full bucket holds
// capacity units. ok is false when capacity would overflow int64.
func (l Limit) TokenUnits() (unit, rate, capacity int64, ok bool) {
	window := int64(l.Window / time.Microsecond)
	quota := int64(l.Quota)
	g := gcd(window, quota)
	unit, rate = window/g, quota/g
	burst := int64(l.Capacity())
	if burst != 0 && unit > (1<<63-1)/burst {
		return unit, rate, 0, false
	}
	return unit, rate, unit * burst, true
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	if a == 0 {
		return 1
	}
	return a
}
