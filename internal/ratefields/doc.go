// Package ratefields reads what an upstream HTTP server says of its rate
// limits, for a client that wants to stop sending before it is refused:
// [Parse] takes a response's header, status and (for a 429 or 503) body
// and returns the quotas it publishes, where they stand, how long to
// wait, and a [Problem] for every value it ignored or changed.
//
// It reads drafts 8 to 11 of draft-ietf-httpapi-ratelimit-headers (RFC
// 9651 structured fields, names as Strings or Tokens), drafts 6 and 7 as
// express-rate-limit sends them (unnamed: their [Limit] and [Policy] have
// the name ""), X-RateLimit-* with GitHub's -Resource and -Used and
// Discord's -Reset-After, Retry-After, and the RFC 9457 problem details
// of the draft's types. Of several forms the most precise that says
// anything wins; Retry-After and the body are always read.
// docs/outbound.md tells the forms and what is taken of each.
//
// A value is used only when it is what its form defines; anything else is
// ignored and reported with a [Reason], never an error or a panic: an
// unparsable field whole, as the drafts require, a wrong item alone. A
// single-valued field on several lines that differ is ignored
// ([ReasonDuplicate]); a policy or limit listed twice is kept once, the
// tighter. What is read is bounded whatever the input: [MaxField] bytes
// of a field, [MaxBody] of a body, [MaxItems] items, names of [MaxName]
// bytes and partition keys of [MaxPartition].
package ratefields
