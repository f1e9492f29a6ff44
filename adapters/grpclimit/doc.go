// Package grpclimit runs a [ratelimit.Limiter] as gRPC server
// interceptors, unary and stream.
//
// It only maps the Limiter's decision of a call onto gRPC: the decision,
// the keys and the fields sent are the Limiter's, exactly as with
// net/http. The Limiter reads each call in place as a [ratelimit.Request]:
// its route "POST /package.Service/Method", its header the call's metadata
// (ratelimit.HeaderKey("X-API-Key", secret) reads "x-api-key"), its peer
// the call's. [Methods] gives methods and services limits of their own.
//
// A call admitted goes on, its context carrying the decision and its
// header metadata the rate-limit fields. One refused gets a status of
// fixed text (ResourceExhausted when denied, with errdetails.RetryInfo and
// errdetails.QuotaFailure), sent Trailers-Only so that a client's retry
// policy may retry it (gRFC A6). See docs/grpc.md.
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
