// Package grpclimit runs a [ratelimit.Limiter] as gRPC server
// interceptors, unary and stream.
//
// It only maps the Limiter's decision of a call onto gRPC: the
// decision, the keys and the fields sent are the Limiter's, exactly as
// with net/http. The Limiter reads each call in place, nothing copied, as
// a [ratelimit.Request]: its route is POST of its full method ("POST
// /package.Service/Method"); its context the call's (so [ratelimit.User]
// keys it by what an authenticating interceptor before this one put
// there); its header the call's metadata, in any case
// (ratelimit.HeaderKey("X-API-Key", secret) reads "x-api-key", hashed as
// over HTTP; binary "-bin" keys are never read); its peer the call's (so
// [ratelimit.IPKey] keys it by the peer, or a trusted proxy's
// "x-forwarded-for"; a Unix socket's calls have no such key). [Methods]
// gives methods and services limits of their own.
//
// A call the Limiter admits goes on, its handler's context carrying the
// decision ([ratelimit.Decisions], [ratelimit.Charge]). One it refuses
// gets an error of fixed text, never the store's: ResourceExhausted,
// "rate limit exceeded" ("banned after repeated denials" for a banned key,
// see [ratelimit.Ban]), when it is denied, with the details
// errdetails.RetryInfo, the Retry-After in seconds, and
// errdetails.QuotaFailure, a violation per limit that denied, Subject the
// key the call was counted under (never a secret), QuotaId the limit's
// name (Limit.Name, as RateLimit-Policy names it) and Description the
// limit (Limit.String); when the store fails: the call goes on, or, with
// [ratelimit.FailClosed] as the Limiter's error handler, Unavailable,
// "rate limiting is unavailable", with a RetryInfo of 1s; and
// InvalidArgument, "the call cannot be rate limited", naming the metadata
// key a built-in key function found missing, for a call without a key or
// with an invalid cost. A client reads the details with
// status.FromError(err) and Status.Details.
//
// An admitted call's header metadata carries the RateLimit and
// RateLimit-Policy fields the Limiter set, as "ratelimit" and
// "ratelimit-policy" (see docs/headers.md), when the call is decided, as
// on a streamed HTTP response: what [ratelimit.Charge] or a count-only
// Limiter takes afterwards shows in the next call's. With interceptors of
// several Limiters, each sets the fields of every Limiter that decided
// the call so far: the last value of each key lists them all.
//
// A refused call is sent Trailers-Only, with no header before its
// status, so that a client's retry policy may retry it (gRFC A6): the
// fields, the Retry-After under "retry-after" and, when the refusal says
// when to retry, "grpc-retry-pushback-ms", its RetryInfo's delay in
// milliseconds, go in its trailer.
//
//	limiter, err := ratelimit.New(store, "api",
//		ratelimit.WithLimits(ratelimit.PerMinute(100)),
//		grpclimit.Methods(map[string][]ratelimit.Limit{
//			"/shop.Orders/Create": {ratelimit.PerMinute(10)},
//		}),
//	)
//	...
//	server := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(auth, grpclimit.UnaryServerInterceptor(limiter)),
//		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(limiter)),
//	)
//
// The module pairs with the root module of the same repository and
// version; it brings gRPC, which the root module does not need.
package grpclimit
