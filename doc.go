// Package ratelimit limits how often clients may call an HTTP service,
// with counters shared by every instance of the service.
//
// Build a [Limiter] on a store and wrap your handler:
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	shared, err := store.NewRedis(client, store.RedisOptions{})
//	...
//	s, err := store.NewFallback(shared, store.FallbackOptions{}) // decides in process while Redis fails
//	...
//	limiter, err := ratelimit.New(s, "api",
//		ratelimit.WithLimits(ratelimit.PerMinute(100)),
//		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
//			"POST /login": {ratelimit.PerMinute(5).Using(ratelimit.SlidingLog)},
//		}),
//	)
//	...
//	http.ListenAndServe(":8080", limiter.Handler(mux))
//
// For every request the Limiter takes a key ([KeyFunc]: by default the
// client's IP address; see [IPKey] behind a proxy, [HeaderKey] for API
// keys, [User], [Route], [Join]), asks the store whether the request
// passes the limits of its route, sets the RateLimit headers ([Headers]),
// and either serves the request or answers 429 Too Many Requests. When
// the store fails, the request is served ([FailOpen], the default) or
// refused ([FailClosed]). Limits can depend on the caller
// ([WithLimitsFunc], for plans and tiers), and a Limiter can count only
// failed or only successful responses ([WithCountOnly], for logins) and
// ban keys that keep getting denied, for longer each time ([WithBan]);
// [Limiter.Peek] reads a caller's quota without spending it, a handler
// reads the decisions taken on its request with [Decisions], and an
// observer ([WithObserver]) sees every request's outcome. A gRPC call, a
// message of a queue or a job is decided by the same Limiter, with every
// feature: [Limiter.Decide] returns the decision as a [Verdict], of any
// [Request], such as the one [Key] makes of a client's key.
//
// A [Limit] says how many requests a key may make per window and how they
// are counted: [SlidingWindow] (the default), [FixedWindow], [SlidingLog]
// or [TokenBucket]; per calendar day, week or month in a time zone
// ([Daily], [Weekly], [Monthly]); or how many may be in flight at once
// ([Concurrent]). A limit may count what requests use, reported by their
// handlers with [Charge] once known ([Limit].Usage): tokens, bytes,
// points. [NewLimits] checks a set of limits once; a [Store]
// decides a request against all of them at once, atomically, and answers
// with a [Decision] holding one [Result] per limit. The package store has
// a Redis store, an in-process Memory store and a Fallback that keeps
// deciding while Redis fails; the packages adapters/ginlimit and
// adapters/echolimit run a Limiter in Gin and Echo, and
// adapters/grpclimit as gRPC server interceptors.
//
// The key a Limiter gives the store names its namespace, the route whose
// limits apply and the client: Limiters of different namespaces never
// share counters; Limiters of one namespace, on every instance, share
// them.
//
// The manual is in the repository's docs/ directory.
//
// This package imports only the standard library.
package ratelimit
