// Package ratelimit limits how often clients may call an HTTP service,
// with counters shared by every instance of the service.
//
// A [Limit] says how many requests a key may make per window and how they
// are counted: [FixedWindow], [SlidingLog], [SlidingWindow] (the default)
// or [TokenBucket]. A [Store] decides each request against one or more
// limits at once, atomically, and answers with a [Decision] holding one
// [Result] per limit. The package store provides a Redis store.
//
// This package imports only the standard library.
package ratelimit
