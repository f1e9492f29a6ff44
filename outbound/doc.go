// Package outbound is the other side of rate limiting: an
// [http.RoundTripper] for the APIs a service calls, which limit it. It
// reads what every response says of the upstream's limits (the
// RateLimit and RateLimit-Policy fields of every draft, Retry-After,
// X-RateLimit-*, and the problem details of a 429 or 503), keeps what it
// learns in a [ratelimit.Store] shared by the goroutines of a process
// and, through Redis, by every instance, and holds back a request whose
// budget is known to be spent until it is not, or refuses it at once
// with an [*Error] saying when to retry. The upstream's published limits
// may also be declared up front, with the limits and algorithms of the
// server side, tokens charged from what each response reports.
//
//	t, err := outbound.New(nil, redisStore,
//		outbound.WithLimits("api.example.com",
//			ratelimit.PerMinute(500).Named("rpm"),
//			ratelimit.Limit{Quota: 200_000, Window: time.Minute, Usage: true, Name: "tpm"}),
//		outbound.WithUsage(tokensFromResponse))
//	...
//	client := &http.Client{Transport: t}
//
// See docs/outbound.md.
package outbound
