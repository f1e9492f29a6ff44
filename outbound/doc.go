// Package outbound is the other side of rate limiting: an
// [http.RoundTripper] for the APIs a service calls, which limit it. It
// learns each upstream's limits from its responses, keeps them in a
// [ratelimit.Store] that every instance may share, and holds back a
// request whose budget is spent, or refuses it with an [*Error]. Limits
// an upstream publishes may also be declared up front:
//
//	t, err := outbound.New(nil, redisStore,
//		outbound.WithLimits("api.example.com",
//			ratelimit.PerMinute(500).Named("rpm"),
//			ratelimit.Limit{Quota: 200_000, Window: time.Minute, Usage: true, Name: "tpm"}),
//		outbound.WithUsage(tokensFromResponse))
//	...
//	client := &http.Client{Transport: t}
//
// docs/outbound.md tells what it reads of a response and what it does.
package outbound
