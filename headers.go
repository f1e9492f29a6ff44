package ratelimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The response headers a Limiter sets, in canonical form.
const (
	headerPolicy     = "Ratelimit-Policy"
	headerRateLimit  = "Ratelimit"
	headerXLimit     = "X-Ratelimit-Limit"
	headerXRemaining = "X-Ratelimit-Remaining"
	headerXReset     = "X-Ratelimit-Reset"
	headerRetryAfter = "Retry-After"
)

// HeaderStyle selects the rate-limit headers a [Limiter] sets on every
// response it lets through or denies (see [WithHeaders]): HeadersDraft,
// HeadersX, both (the default), or none (0). Retry-After is always set on
// a 429.
type HeaderStyle uint8

const (
	// HeadersDraft sets RateLimit-Policy and RateLimit, the fields of the
	// IETF draft "RateLimit header fields for HTTP"
	// (draft-ietf-httpapi-ratelimit-headers-11), as RFC 9651 structured
	// fields:
	//
	//	RateLimit-Policy: "api";q=100;w=60, "burst";q=10;w=1
	//	RateLimit: "api";r=42;t=17, "burst";r=9;t=1
	//
	// Both list every limit of every Limiter that decided the request: a
	// global Limiter's and a route's add up. q is the quota (a token
	// bucket's burst), w the window in seconds (the time a token bucket
	// takes to fill), r what remains, t the seconds until it is all back;
	// all rounded up to whole seconds.
	HeadersDraft HeaderStyle = 1 << iota

	// HeadersX sets the widespread X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset (seconds from now, not a
	// timestamp), for the limit closest to denying, of every Limiter that
	// decided the request: the one that denied or, when allowed, the one
	// with the fewest units left.
	HeadersX
)

// setHeaders writes the rate-limit headers of every decision taken on
// the request so far, in style: RateLimit-Policy and RateLimit list every
// limit of every Limiter that decided, X-RateLimit-* describe the one
// closest to denying (see tighter). The values that change per request
// are cut from one string: the RateLimit value holds X-RateLimit-Remaining
// and X-RateLimit-Reset too, and Go's substrings share their bytes; and
// the three value slices share one array. So the headers of a request
// cost two allocations, and one more per Limiter past the first.
func setHeaders(w http.ResponseWriter, style HeaderStyle, s *requestState) {
	if style == 0 {
		return
	}
	var buf [128]byte
	b := buf[:0]
	var tight Result
	var tightPolicy *policy
	tightAt, remStart, remEnd, resetStart, resetEnd := -1, 0, 0, 0, 0
	for _, v := range s.verdicts {
		for i, r := range v.decision.Results {
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			b = append(b, v.policy.names[i]...)
			b = append(b, ";r="...)
			rs := len(b)
			b = strconv.AppendInt(b, sfInt(int64(r.Remaining)), 10)
			re := len(b)
			b = append(b, ";t="...)
			ts := len(b)
			b = strconv.AppendInt(b, sfInt(seconds(r.ResetAfter)), 10)
			if tightAt < 0 || tighter(r, tight) {
				tight, tightPolicy, tightAt = r, v.policy, i
				remStart, remEnd, resetStart, resetEnd = rs, re, ts, len(b)
			}
		}
	}
	if tightAt < 0 {
		return
	}
	field := string(b)
	values := make([]string, 3)
	values[0], values[1], values[2] = field, field[remStart:remEnd], field[resetStart:resetEnd]
	h := w.Header()
	if style&HeadersDraft != 0 {
		h[headerPolicy] = s.policyHeader()
		h[headerRateLimit] = values[0:1:1]
	}
	if style&HeadersX != 0 {
		h[headerXLimit] = tightPolicy.capacity[tightAt]
		h[headerXRemaining] = values[1:2:2]
		h[headerXReset] = values[2:3:3]
	}
}

// policyHeader returns the RateLimit-Policy value of the Limiters that
// decided, in order.
func (s *requestState) policyHeader() []string {
	if len(s.verdicts) == 1 {
		return s.verdicts[0].policy.header
	}
	parts := make([]string, len(s.verdicts))
	for i, v := range s.verdicts {
		parts[i] = v.policy.header[0]
	}
	return []string{strings.Join(parts, ", ")}
}

// setRetryAfter sets Retry-After to d rounded up to whole seconds, at
// least 1.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header()[headerRetryAfter] = []string{strconv.FormatInt(max(seconds(d), 1), 10)}
}

// policyWindow is the w of a limit: its window, or for a token bucket the
// time to refill a whole burst.
func policyWindow(l Limit) time.Duration {
	if l.Algorithm == TokenBucket {
		l = l.withDefaults()
		return time.Duration(int64(l.Window) / int64(l.Quota) * int64(l.Burst))
	}
	return l.Window
}

// quoteString writes s, printable ASCII, as an RFC 9651 sf-string.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// seconds rounds d up to whole seconds, at least 0.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfInt clamps n to the largest Integer of RFC 9651, which has 15 digits.
func sfInt(n int64) int64 { return min(n, 999_999_999_999_999) }
