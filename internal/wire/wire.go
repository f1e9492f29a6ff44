// Package wire holds the names and numbers that more than one part of
// this module writes or reads, each defined once: the rate-limit fields
// and problem types a Limiter sends and package ratefields reads back,
// the store's key prefix that admin shares, and the bounds on quotas and
// names that the root, the stores, admin, outbound and ratefields check.
package wire

// MaxQuota is the largest quota, and the largest count, that a Redis
// script keeps exact: Lua numbers are doubles, exact up to 2^53.
const MaxQuota = 1<<53 - 1

// MaxName is the longest name, in bytes, of a limit (a policy), a
// namespace or an upstream's policy.
const MaxName = 64

// DefaultPrefix starts every Redis key of the store and admin, unless told otherwise.
const DefaultPrefix = "rl:"

// The response fields a Limiter sets and ratefields reads, canonical:
// draft-ietf-httpapi-ratelimit-headers-11's, and X-RateLimit-*.
const (
	FieldPolicy     = "Ratelimit-Policy"
	FieldRateLimit  = "Ratelimit"
	FieldXLimit     = "X-Ratelimit-Limit"
	FieldXRemaining = "X-Ratelimit-Remaining"
	FieldXReset     = "X-Ratelimit-Reset"
	FieldRetryAfter = "Retry-After"
	// FieldShadow names the shadow limits that would have denied a
	// request served (ratelimit.Headers' Shadow).
	FieldShadow = "X-Ratelimit-Shadow"
)

// The problem types of the draft's section 5, for RFC 9457.
const (
	ProblemQuotaExceeded   = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	ProblemAbnormalUsage   = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
	ProblemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)
