package ratefields

import (
	"strings"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// epoch is the X-RateLimit-Reset above which it is a Unix time, as
// GitHub and express-rate-limit send: no client waits a year.
const epoch = 365 * 24 * 60 * 60

func (p *parser) xRateLimit() {
	limit, hasLimit := read(p, wire.FieldXLimit, parseCount)
	remaining, hasRemaining := read(p, wire.FieldXRemaining, parseCount)
	if !hasLimit && !hasRemaining {
		return
	}
	name, _ := read(p, fieldXResource, parseResource)
	if hasLimit {
		p.info.Policies = []Policy{{Name: name, Quota: limit, Unit: unitRequests}}
	}
	if !hasRemaining {
		return
	}
	if hasLimit && remaining > limit {
		p.report(wire.FieldXRemaining, ReasonContradicts)
		return
	}
	if hasLimit { // GitHub's Used plus remaining is its limit: only checked
		if used, ok := read(p, fieldXUsed, parseCount); ok && used > limit-remaining {
			p.report(fieldXUsed, ReasonContradicts)
		}
	}
	p.info.Limits = []Limit{{Name: name, Remaining: remaining, Reset: p.xReset()}}
}

// parseResource reads X-RateLimit-Resource: a token of at most MaxName bytes.
func parseResource(v string) (string, Reason) {
	switch {
	case len(v) > MaxName:
		return "", ReasonTooLarge
	case !isToken(v):
		return "", ReasonMalformed
	}
	return v, ""
}

// xReset returns the time until the limit resets, from
// X-RateLimit-Reset-After or else X-RateLimit-Reset (a Unix time above
// epoch); 0 when neither says.
func (p *parser) xReset() time.Duration {
	if s, ok := read(p, fieldXResetAfter, parseSeconds); ok {
		return p.delay(fieldXResetAfter, s.secs, s.nanos, true)
	}
	s, ok := read(p, wire.FieldXReset, parseSeconds)
	switch {
	case !ok:
		return 0
	case s.secs <= epoch:
		return p.delay(wire.FieldXReset, s.secs, s.nanos, true)
	}
	return p.until(wire.FieldXReset, time.Unix(s.secs, s.nanos), true)
}

// parseCount reads decimal digits, a count from 0 to MaxInt.
func parseCount(s string) (int64, Reason) {
	switch {
	case strings.HasPrefix(s, "-") && isDigits(s[1:]):
		return 0, ReasonNegative
	case !isDigits(s):
		return 0, ReasonMalformed
	}
	return digits(s), count(digits(s))
}

// seconds are whole seconds (MaxInt+1 standing for any more) and nanoseconds.
type seconds struct{ secs, nanos int64 }

// parseSeconds reads decimal seconds with up to nine fractional digits.
func parseSeconds(s string) (seconds, Reason) {
	whole, frac, dot := strings.Cut(s, ".")
	if strings.HasPrefix(whole, "-") && isDigits(whole[1:]) && (!dot || isDigits(frac)) {
		return seconds{}, ReasonNegative
	}
	if !isDigits(whole) || dot && (!isDigits(frac) || len(frac) > 9) {
		return seconds{}, ReasonMalformed
	}
	v := seconds{secs: digits(whole)}
	for i := range 9 {
		v.nanos *= 10
		if i < len(frac) {
			v.nanos += int64(frac[i] - '0')
		}
	}
	return v, ""
}

// isDigits reports whether s is one or more decimal digits.
func isDigits(s string) bool {
	return s != "" && strings.TrimLeft(s, "0123456789") == ""
}

// digits returns the value of decimal digits s, at most MaxInt+1.
func digits(s string) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		n = n*10 + int64(s[i]-'0')
		if n > MaxInt {
			return MaxInt + 1
		}
	}
	return n
}

// tchars are the characters of an HTTP token (RFC 9110, section 5.6.2).
const tchars = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func isToken(s string) bool { return s != "" && strings.Trim(s, tchars) == "" }
func isTchar(c byte) bool   { return strings.IndexByte(tchars, c) >= 0 }
