// Package ratefields reads what an upstream HTTP server says of its rate
// limits, for a client that wants to stop sending before it is refused:
// [Parse] takes a response's header, status and (for a 429 or 503) body
// and returns the quotas it publishes, where they stand, how long to
// wait, and a [Problem] for every value it ignored or changed.
//
// # The forms read
//
//   - draft-ietf-httpapi-ratelimit-headers-08 to -11, what this module's
//     Limiter sends: RateLimit-Policy, a List of named quota policies
//     (q, w, qu, pk), and RateLimit, a List of named service limits (r, t,
//     pk), as RFC 9651 structured fields. Names are Strings (draft 11) or
//     Tokens (drafts 8 to 10).
//   - drafts 6 and 7, as express-rate-limit sends them: RateLimit-Policy,
//     a List of Integers with w; RateLimit, a Dictionary of limit,
//     remaining and reset (draft 7), or RateLimit-Limit,
//     RateLimit-Remaining and RateLimit-Reset, an Integer each (draft 6).
//     They name no policy: their [Limit] and [Policy] have the name "".
//   - X-RateLimit-Limit, -Remaining and -Reset, with GitHub's
//     X-RateLimit-Resource (the policy's name) and X-RateLimit-Used
//     (checked against the others, not kept), and Discord's
//     X-RateLimit-Reset-After.
//   - Retry-After, delay-seconds or an HTTP-date.
//   - RFC 9457 problem details (application/problem+json) of a 429 or 503
//     of the draft's types, quota-exceeded, temporary-reduced-capacity or
//     abnormal-usage-detected, with their member "violated-policies".
//
// Of several forms, the most precise that says anything wins, and the
// others are not read: drafts 8 to 11 (named policies with units and
// partitions), then drafts 6 and 7 (draft 7's RateLimit Dictionary before
// draft 6's three fields), then X-RateLimit-*. This module's Limiter
// sends both draft 11 and X-RateLimit-*, which repeat the limit closest
// to denying and are not read. Retry-After and the body are always read.
//
// # Strictness
//
// A value is used only when it is what its form defines; anything else is
// ignored and reported with a [Reason], never an error or a panic. An
// unparsable field is ignored whole, as the drafts require; a wrong
// policy or limit item is ignored alone and the rest of its field kept.
// Numbers are non-negative integers of at most [MaxInt]; a duration over
// the caller's cap is cut to it ([ReasonCapped]). A single-valued field
// (Retry-After, RateLimit-Limit, each X-RateLimit-*) on several lines
// that differ is ignored ([ReasonDuplicate]); lines that repeat one value
// count as one. A policy or limit listed twice with different values is
// kept once, the tighter: the smaller quota, or the fewer units
// remaining. What is read is bounded whatever the input: [MaxField]
// bytes of a field, [MaxBody] of a body, [MaxItems] policies, limits and
// violated policies, names of [MaxName] bytes and partition keys of
// [MaxPartition].
package ratefields
