// Package ratefields reads what an upstream HTTP server says of its rate
// limits, for a client that wants to stop sending before it is refused:
// [Parse] takes a response's header, status and (for a 429 or 503) body
// and returns the quotas it publishes, where they stand, how long to
// wait, and a [Problem] for every value it ignored or changed.
//
// It reads drafts 6 to 11 of draft-ietf-httpapi-ratelimit-headers;
// X-RateLimit-*, with GitHub's -Resource and -Used and Discord's
// -Reset-After; Retry-After; and RFC 9457 problem details. See
// docs/outbound.md for which wins of several, and what is taken of each.
// Drafts 6 and 7 name no policy: their [Limit] and [Policy] have the name "".
//
// A value is used only when it is what its form defines; anything else is
// ignored and reported with a [Reason], never an error or a panic: an
// unparsable field whole, as the drafts require, a wrong item alone. What
// is read is bounded whatever the input (see [MaxField] and those beside it).
package ratefields
