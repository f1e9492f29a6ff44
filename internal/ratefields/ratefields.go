package ratefields

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// Bounds on what Parse reads and returns, whatever the input.
const (
	// MaxInt is the largest quota or remaining count accepted: 2^53−1,
	// this module's largest quota, which a float64 holds exactly.
	MaxInt = wire.MaxQuota

	// MaxWindow is the longest policy window accepted: ten years, past the
	// longest period any quota counts over, and far from time.Duration's
	// limit. A window is not a wait, so the caller's cap does not cut it.
	MaxWindow = 3650 * 24 * time.Hour

	// MaxItems is how many policies, limits and violated policies Parse keeps: the first.
	MaxItems = 16

	// MaxName is the longest policy name kept, in bytes, as this module's Limiter allows.
	MaxName = wire.MaxName

	// MaxPartition is the longest partition key kept, in decoded bytes.
	MaxPartition = 256

	// MaxField is the most bytes of one field, over all its lines, that
	// Parse reads; a longer field is ignored.
	MaxField = 16 << 10

	// MaxBody is the longest problem details body Parse reads; a caller
	// reading MaxBody+1 bytes of a body lets Parse tell it is longer.
	MaxBody = 64 << 10
)

// Info is what a response says of the upstream's limits. The zero Info says nothing.
type Info struct {
	// Policies are the quotas the upstream publishes, in the order given:
	// from RateLimit-Policy, or from the single limit a draft 6 or 7 form
	// or X-RateLimit-* describe. A form that names no policy lists the
	// policy of its limit first.
	Policies []Policy

	// Limits are where the quotas stand after this response. A Limit
	// counts against the Policy of the same Name and Partition (a Policy
	// with no Partition matching any), when Policies has one.
	Limits []Limit

	// RetryAfter is the wait Retry-After asks for, at most the caller's
	// cap; 0 when the field is absent or ignored, or names a past date.
	// It is read on every response: a 3xx's Retry-After asks the client
	// to wait before following the redirect.
	RetryAfter time.Duration

	// Limited reports whether the response refused the request for a
	// limit: a 429, or a 503 with a usable Retry-After or a draft problem type.
	Limited bool

	// Violated are the problem details' "violated-policies" of a 429 or
	// 503, names as given, at most MaxItems; nil when the body has none.
	Violated []string
}

// A Policy is a quota the upstream publishes: Quota units per Window.
type Policy struct {
	Name string // "" for a form that names none

	// Quota is how many units the policy allows: q, the draft 6 and 7
	// limit, or X-RateLimit-Limit.
	Quota int64

	// Window is the period Quota applies to, in whole seconds: w; 0 when
	// the form does not say, as for a quota counted over calendar periods
	// or over requests in flight.
	Window time.Duration

	// Unit is what Quota counts: "requests" (also when the form does not
	// say), "content-bytes" or "concurrent-requests".
	Unit string

	// Partition is the partition key pk, its decoded bytes as a string: the
	// upstream's name for the share of its capacity the request drew on,
	// opaque to the client. "" when absent.
	Partition string
}

// A Limit is where a quota stands: Remaining units until Reset.
type Limit struct {
	Name string // its policy's, "" for a form that names none

	// Remaining is how many units the client may still spend: r, remaining
	// or X-RateLimit-Remaining.
	Remaining int64

	// Reset is the time within which the client may spend at most
	// Remaining more units, and after which more may come back: t (draft
	// 11's effective window, not necessarily when the quota is full
	// again), reset, X-RateLimit-Reset or X-RateLimit-Reset-After; at most
	// MaxWindow (a reset is no wait); 0 when the form does not say.
	Reset time.Duration

	Partition string // the partition key pk, as in Policy
}

// A Problem is a value Parse ignored or changed, and why.
type Problem struct {
	// Field is the canonical name of the header field that holds the
	// value, such as "Ratelimit-Policy" or "X-Ratelimit-Reset", or "body".
	Field  string
	Reason Reason // what was wrong with it
}

// A Reason says why Parse ignored or changed a value. The set is closed
// and small, for a metric's label.
type Reason string

// The reasons. Each is given at most once per field and response.
const (
	// ReasonMalformed: the value is not what its form defines (unparsable,
	// of the wrong type, without a required parameter, a window of 0, an
	// unregistered unit, a draft 6 remaining count without its limit). The
	// value, or its item, is ignored.
	ReasonMalformed Reason = "malformed"

	// ReasonDuplicate: a single-valued field on lines that differ
	// (ignored); a policy or limit listed twice, differently (the tighter
	// kept); a problem details member given twice (the body ignored).
	ReasonDuplicate Reason = "duplicate"

	// ReasonNegative: a number below zero; it, or its item, is ignored.
	ReasonNegative Reason = "negative"

	// ReasonTooLarge: a number above MaxInt, a window above MaxWindow, a
	// name above MaxName bytes, a partition key above MaxPartition, a field
	// above MaxField or a body above MaxBody. It is ignored.
	ReasonTooLarge Reason = "too_large"

	// ReasonTooMany: more than MaxItems policies, limits or violated
	// policies; the first MaxItems are kept.
	ReasonTooMany Reason = "too_many"

	// ReasonCapped: a duration above the caller's cap, cut to the cap.
	ReasonCapped Reason = "capped"

	// ReasonInPast: a Retry-After date or an X-RateLimit-Reset Unix time
	// already past, read as 0.
	ReasonInPast Reason = "in_past"

	// ReasonContradicts: values that cannot all be true: a limit's
	// remaining units above its policy's quota (the limit is ignored), or
	// X-RateLimit-Used above what X-RateLimit-Limit and
	// X-RateLimit-Remaining leave room for (Used is ignored).
	ReasonContradicts Reason = "contradicts"
)

// Parse reads what a response's header h, status code and body say of
// the upstream's limits, at now. A wait, Retry-After, over maxDelay (a
// maxDelay below zero caps at zero) is capped and reported
// (ReasonCapped), not dropped. A limit's Reset is no wait while units
// are left (a monthly quota resets in weeks): it is kept up to MaxWindow.
//
// h is as net/http gives it, with canonical keys. body is read only for
// a 429 or 503 whose Content-Type is RFC 9457's application/problem+json:
// the caller may pass nil for any other, and at most MaxBody+1 bytes of
// one. Parse returns a Problem for every value it ignored or changed;
// none is an error: the rest is still read. Parse never modifies h or
// body, keeps neither, and is safe for concurrent use.
func Parse(h http.Header, status int, body []byte, now time.Time, maxDelay time.Duration) (Info, []Problem) {
	p := parser{h: h, now: now, maxDelay: max(maxDelay, 0)}
	retryAfter, read := p.retryAfter()
	p.info.RetryAfter = retryAfter
	if !p.ietf() {
		p.xRateLimit()
	}
	refused := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	problem := refused && p.problemDetails(body)
	p.info.Limited = status == http.StatusTooManyRequests || refused && (read || problem)
	return p.info, p.problems
}

// The fields Parse reads beside those of package wire.
const (
	fieldLimit       = "Ratelimit-Limit"
	fieldRemaining   = "Ratelimit-Remaining"
	fieldReset       = "Ratelimit-Reset"
	fieldXResetAfter = "X-Ratelimit-Reset-After"
	fieldXResource   = "X-Ratelimit-Resource"
	fieldXUsed       = "X-Ratelimit-Used"
	fieldContentType = "Content-Type"
	fieldBody        = "body"
)

// parser is one call of Parse: what it reads and what it has found.
type parser struct {
	h        http.Header
	now      time.Time
	maxDelay time.Duration
	info     Info
	problems []Problem
}

// report records a Problem once per field and reason, so that problems are bounded.
func (p *parser) report(field string, reason Reason) {
	if q := (Problem{Field: field, Reason: reason}); !slices.Contains(p.problems, q) {
		p.problems = append(p.problems, q)
	}
}

// lines returns field's lines, or nil when absent or, reported, over
// MaxField with their joining ", ": a thousand empty lines are not small.
func (p *parser) lines(field string) []string {
	lines := p.h[field]
	n := 0
	for _, l := range lines {
		n += len(l) + len(", ")
	}
	if n-len(", ") > MaxField {
		p.report(field, ReasonTooLarge)
		return nil
	}
	return lines
}

// single returns a single-valued field's value; ok is false when it is
// absent, too large, or on lines that differ (reported).
func (p *parser) single(field string) (v string, ok bool) {
	lines := p.lines(field)
	if len(lines) == 0 {
		return "", false
	}
	v = trimOWS(lines[0])
	if slices.ContainsFunc(lines[1:], func(l string) bool { return trimOWS(l) != v }) {
		p.report(field, ReasonDuplicate)
		return "", false
	}
	return v, true
}

// read reads a single-valued field with parse; ok is false when it is
// absent or, reported, not what parse reads.
func read[T any](p *parser, field string, parse func(string) (T, Reason)) (T, bool) {
	if s, ok := p.single(field); ok {
		v, reason := parse(s)
		if reason == "" {
			return v, true
		}
		p.report(field, reason)
	}
	var zero T
	return zero, false
}

// trimOWS trims a value's optional whitespace, as net/http does.
func trimOWS(s string) string { return strings.Trim(s, " \t") }

// count returns why n is not a quota or remaining count, or "".
func count(n int64) Reason {
	switch {
	case n < 0:
		return ReasonNegative
	case n > MaxInt:
		return ReasonTooLarge
	}
	return ""
}

// delay returns secs and nanos as a wait cut to the caller's cap
// (ReasonCapped); or, with reset, as a limit's reset, no wait while
// units are left (a monthly quota's), cut to MaxWindow (ReasonTooLarge).
func (p *parser) delay(field string, secs, nanos int64, reset bool) time.Duration {
	limit, reason := p.maxDelay, ReasonCapped
	if reset {
		limit, reason = MaxWindow, ReasonTooLarge
	}
	capSecs := int64(limit / time.Second)
	if secs > capSecs || secs == capSecs && nanos > int64(limit%time.Second) {
		p.report(field, reason)
		return limit
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos)
}

// until returns the time from now to at, cut as delay cuts it. Dates
// and Unix times count in seconds: one in the current second is now, one
// before it past (reported as ReasonInPast, and read as 0).
func (p *parser) until(field string, at time.Time, reset bool) time.Duration {
	if at.Before(p.now.Truncate(time.Second)) {
		p.report(field, ReasonInPast)
		return 0
	}
	d := max(at.Sub(p.now), 0)
	return p.delay(field, int64(d/time.Second), int64(d%time.Second), reset)
}
