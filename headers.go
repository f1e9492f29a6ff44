package ratelimit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
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
	// bucket's burst), w the window in seconds, rounded up (for a token
	// bucket, the time it takes to fill), r what remains. t is the effective
	// window (see [Result].Window): for t seconds at most r more units
	// pass, whatever the client sends, so it is rounded down to whole
	// seconds. On a 429 every t, of every Limiter, is at most the
	// Retry-After sent, which the draft says should not come before the
	// reset; a dry run's would-be denial is served without Retry-After,
	// and its t are not capped. [WithQuotaUnit] adds qu to the policy's
	// items, [WithPartitionKey] pk to the items of both.
	HeadersDraft HeaderStyle = 1 << iota

	// HeadersX sets the widespread X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset (the seconds until the
	// limit is full again, rounded up: from now, not a timestamp, and
	// unlike t never capped), for the limit closest to denying, of every
	// Limiter that decided the request: the one that denied or, when
	// allowed, the one with the fewest units left.
	HeadersX
)

// setHeaders writes the rate-limit headers of every decision taken on
// the request so far, in style: RateLimit-Policy and RateLimit list every
// limit of every Limiter that decided, X-RateLimit-* describe the one
// closest to denying (see tighter). retryAfter is the Retry-After, in
// seconds, that the response will carry when the request is denied, 0
// when it has none; no t exceeds it (draft section 6: Retry-After is not
// to come before the reset).
//
// The values that change per request are cut from one string: the
// RateLimit value, then X-RateLimit-Reset; X-RateLimit-Remaining is the r
// of the tightest item; Go's substrings share their bytes; and the three
// value slices share one array. So the headers of a request cost two
// allocations, and two more when several Limiters decided or one sets a
// pk: the RateLimit-Policy value is then made per request.
func setHeaders(w http.ResponseWriter, style HeaderStyle, s *requestState, retryAfter int64) {
	if style == 0 {
		return
	}
	var buf [128]byte
	b := buf[:0]
	var tight Result
	var tightPolicy *policy
	tightAt, remStart, remEnd := -1, 0, 0
	for k := range s.verdicts {
		v := &s.verdicts[k] // not a copy: a Decision holds a Result
		for i, r := range v.decision.Results() {
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			b = append(b, v.policy.names[i]...)
			b = append(b, ";r="...)
			rs := len(b)
			b = strconv.AppendInt(b, sfInt(int64(r.Remaining)), 10)
			re := len(b)
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, resetParameter(r.Window, retryAfter), 10)
			if v.pk != "" {
				b = append(b, ";pk="...)
				b = append(b, v.pk...)
			}
			if tightAt < 0 || tighter(r, tight) {
				tight, tightPolicy, tightAt = r, v.policy, i
				remStart, remEnd = rs, re
			}
		}
	}
	if tightAt < 0 {
		return
	}
	fieldEnd := len(b)
	b = strconv.AppendInt(b, sfInt(seconds(tight.ResetAfter)), 10)
	field := s.headers.string(b)
	values := s.headers.strings(3)
	values[0], values[1], values[2] = field[:fieldEnd], field[remStart:remEnd], field[fieldEnd:]
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

// resetParameter is the t of a RateLimit item: the effective window (see
// [Result].Window) rounded down to whole seconds, since rounding up would
// promise more than is true; at most retryAfter when that is not 0.
func resetParameter(window time.Duration, retryAfter int64) int64 {
	t := sfInt(max(int64(window/time.Second), 0))
	if retryAfter > 0 {
		t = min(t, retryAfter)
	}
	return t
}

// policyHeader returns the RateLimit-Policy value of the Limiters that
// decided, in order, every item with its Limiter's pk, if any.
func (s *requestState) policyHeader() []string {
	if len(s.verdicts) == 1 && s.verdicts[0].pk == "" {
		return s.verdicts[0].policy.header
	}
	n := 0
	for _, v := range s.verdicts {
		n += len(", ") + len(v.policy.header[0])
		if v.pk != "" {
			n += len(v.policy.items) * (len(";pk=") + len(v.pk))
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i, v := range s.verdicts {
		if i > 0 {
			b.WriteString(", ")
		}
		if v.pk == "" {
			b.WriteString(v.policy.header[0])
			continue
		}
		for j, item := range v.policy.items {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(item)
			b.WriteString(";pk=")
			b.WriteString(v.pk)
		}
	}
	return []string{b.String()}
}

// retryAfter is the Retry-After of a denial, in seconds: d's RetryAfter
// rounded up, at least 1.
func retryAfter(d Decision) int64 { return max(seconds(d.RetryAfter()), 1) }

// setRetryAfter sets Retry-After to secs seconds.
func setRetryAfter(w http.ResponseWriter, s *requestState, secs int64) {
	var buf [20]byte
	setHeader(w.Header(), &s.headers, headerRetryAfter, s.headers.string(strconv.AppendInt(buf[:0], secs, 10)))
}

// setHeader sets h's field name (in canonical form) to value, the slice
// from a when a is not nil.
func setHeader(h http.Header, a *headerArena, name, value string) {
	var v []string
	if a != nil {
		v = a.strings(1)
	} else {
		v = make([]string, 1)
	}
	v[0] = value
	h[name] = v
}

// arenaOf returns the headerArena of r's state, or nil without one.
func arenaOf(r *http.Request) *headerArena {
	if s := stateOf(r); s != nil {
		return &s.headers
	}
	return nil
}

// partitionKeys makes the pk parameter of [WithPartitionKey]. A nil
// *partitionKeys makes none. It is safe for concurrent use.
type partitionKeys struct {
	pool sync.Pool // of HMAC-SHA256s under the secret
}

// newPartitionKeys returns the partitionKeys of secret, which it copies.
func newPartitionKeys(secret []byte) *partitionKeys {
	secret = bytes.Clone(secret)
	return &partitionKeys{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}}
}

// of returns the pk of the quota counted under storeKey, as an RFC 9651
// Byte Sequence: the first 16 bytes of its HMAC-SHA256, base64 with
// padding, between colons. It returns "" for a nil k.
func (k *partitionKeys) of(storeKey string) string {
	if k == nil {
		return ""
	}
	h := k.pool.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(storeKey))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	k.pool.Put(h)
	var buf [32]byte // ':' + 24 base64 digits + ':'
	b := append(buf[:0], ':')
	b = base64.StdEncoding.AppendEncode(b, sum[:16])
	return string(append(b, ':'))
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

// seconds rounds d up to whole seconds, at least 0. It divides before
// rounding, so that the longest durations do not overflow.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// sfInt clamps n to the largest Integer of RFC 9651, which has 15 digits.
func sfInt(n int64) int64 { return min(n, 999_999_999_999_999) }

// headerArena holds the header values a request's Limiters set, bytes and
// slices, in the request's state, so that setting them allocates nothing.
// What it hands out is never written again (it only appends), so a value
// stays valid, and unchanged, for as long as anything holds it; values
// that do not fit go to the heap.
type headerArena struct {
	buf    [192]byte
	used   int
	values [8]string
	nvals  int
}

// string returns b as a string.
func (a *headerArena) string(b []byte) string {
	if len(b) == 0 || len(b) > len(a.buf)-a.used {
		return string(b)
	}
	n := copy(a.buf[a.used:], b)
	v := unsafe.String(&a.buf[a.used], n)
	a.used += n
	return v
}

// strings returns n zero strings to fill, their capacity n: an append to
// them copies them first.
func (a *headerArena) strings(n int) []string {
	if n > len(a.values)-a.nvals {
		return make([]string, n)
	}
	v := a.values[a.nvals : a.nvals+n : a.nvals+n]
	a.nvals += n
	return v
}
