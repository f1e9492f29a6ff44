package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/bounded"
)

// An Option configures [UnaryServerInterceptor] and [StreamServerInterceptor].
type Option func(*config)

type config struct {
	skip func(ctx context.Context, fullMethod string) bool
}

// WithSkipper exempts the calls for which skip returns true, such as
// health checks ("/grpc.health.v1.Health/Check"): they go on with no check
// and no metadata. skip is called concurrently, with each call's context
// and full method. By default no call is exempt.
func WithSkipper(skip func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) { c.skip = skip }
}

// UnaryServerInterceptor returns an interceptor that lets l decide each
// unary call, as the package's documentation tells; a call l refuses never
// reaches the handler. Of a call l admits, l.Finish gets the code as an
// HTTP status (for [ratelimit.WithCountOnly]), and l.End runs once the
// handler has returned, however (a panic too, passed on after a Finish
// with 500): see docs/grpc.md. It panics, when the server is built, if l
// is nil. The interceptor is safe for concurrent use.
func UnaryServerInterceptor(l *ratelimit.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	ic := newInterceptor("UnaryServerInterceptor", l, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if ic.skip != nil && ic.skip(ctx, info.FullMethod) {
			return handler(ctx, req)
		}
		v := l.Decide(&call{ctx: ctx, route: ic.routes.Get(info.FullMethod)})
		if !v.Allowed {
			md, err := refusal(v)
			grpc.SetTrailer(ctx, md) // fails only outside a server: nowhere to put it
			return nil, err
		}
		if md := metadataOf(v.Fields); md != nil {
			grpc.SetHeader(ctx, md) // fails only outside a server or once an interceptor before sent the header: nowhere to put it
		}
		defer ic.end(v.Context)
		resp, err := handler(v.Context, req)
		l.Finish(v.Context, httpStatus(err))
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor that lets l decide each
// stream once, when it opens, as [UnaryServerInterceptor] decides a call;
// the handler's stream's Context carries the decision. The rate-limit
// fields are the stream's header metadata, sent with its first message or
// its end; a stream refused is sent Trailers-Only. It panics, when the
// server is built, if l is nil. The interceptor is safe for concurrent use.
func StreamServerInterceptor(l *ratelimit.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	ic := newInterceptor("StreamServerInterceptor", l, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		if ic.skip != nil && ic.skip(ctx, info.FullMethod) {
			return handler(srv, ss)
		}
		v := l.Decide(&call{ctx: ctx, route: ic.routes.Get(info.FullMethod)})
		if !v.Allowed {
			md, err := refusal(v)
			ss.SetTrailer(md)
			return err
		}
		if md := metadataOf(v.Fields); md != nil {
			ss.SetHeader(md) // fails only once an interceptor before sent the header: nowhere to put it
		}
		defer ic.end(v.Context)
		if v.Context != ctx {
			ss = &decidedStream{ServerStream: ss, ctx: v.Context}
		}
		err := handler(srv, ss)
		l.Finish(v.Context, httpStatus(err))
		return err
	}
}

// decidedStream is a stream whose Context carries the decision.
type decidedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *decidedStream) Context() context.Context { return s.ctx }

// interceptor is what both interceptors share.
type interceptor struct {
	config
	l      *ratelimit.Limiter
	routes bounded.Map[string, string] // full method to route: "POST /package.Service/Method"
}

func newInterceptor(name string, l *ratelimit.Limiter, opts []Option) *interceptor {
	if l == nil {
		panic("grpclimit: " + name + ": the Limiter is nil")
	}
	ic := &interceptor{l: l}
	for _, opt := range opts {
		opt(&ic.config)
	}
	ic.routes = bounded.Map[string, string]{Max: maxRoutes, Make: func(method string) string { return "POST " + method }}
	return ic
}

// maxRoutes bounds the routes an interceptor keeps: a safeguard, as a
// server's methods are fixed and a client can call no other.
const maxRoutes = 4096

// end ends the call for the Limiter: Finish with 500, which counts only
// after a panic (the code a recovering interceptor sends), then End.
func (ic *interceptor) end(ctx context.Context) {
	ic.l.Finish(ctx, http.StatusInternalServerError)
	ic.l.End(ctx)
}

// A call is the [ratelimit.Request] of a gRPC call, read in place: its
// route is POST of its full method, as grpc-gateway sees it.
type call struct {
	ctx   context.Context
	route string
}

func (c *call) Context() context.Context { return c.ctx }
func (c *call) Route() string            { return c.route }

// Header returns the values of the metadata name, in any case ("X-Api-Key"
// reads "x-api-key"); never those of a binary ("-bin") key.
func (c *call) Header(name string) []string {
	if len(name) > 4 && strings.EqualFold(name[len(name)-4:], "-bin") {
		return nil
	}
	return metadata.ValueFromIncomingContext(c.ctx, name)
}

// Peer returns the call's peer address; the zero AddrPort when it is not
// an IP address (a Unix socket).
func (c *call) Peer() netip.AddrPort {
	p, ok := peer.FromContext(c.ctx)
	if !ok || p.Addr == nil {
		return netip.AddrPort{}
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return ap
}

// metadataOf returns the fields of a Verdict that gRPC carries as
// metadata under their lower-case keys, in place; nil when none.
func metadataOf(fields http.Header) metadata.MD {
	policy, limit, retry := fields["Ratelimit-Policy"], fields["Ratelimit"], fields["Retry-After"]
	if policy == nil && limit == nil && retry == nil {
		return nil
	}
	md := metadata.MD(fields)
	clear(md)
	for _, f := range [...]struct {
		key string
		v   []string
	}{{"ratelimit-policy", policy}, {"ratelimit", limit}, {"retry-after", retry}} {
		if f.v != nil {
			md[f.key] = f.v
		}
	}
	return md
}

// The messages of refused calls: fixed, so that no error's text reaches a client.
const (
	msgDenied      = "rate limit exceeded"
	msgBanned      = "banned after repeated denials"
	msgUnavailable = "rate limiting is unavailable"
	msgInvalid     = "the call cannot be rate limited"
)

// refusal is the error of a call the Limiter refused, by its Verdict v,
// and the trailer metadata to send with it: the rate-limit fields and,
// when v says when to retry, grpc-retry-pushback-ms. Sent Trailers-Only,
// the call is not committed: a client's retry policy may retry it.
func refusal(v ratelimit.Verdict) (metadata.MD, error) {
	md := metadataOf(v.Fields)
	var details []protoadapt.MessageV1
	if v.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(v.RetryAfter)})
		if md == nil {
			md = make(metadata.MD, 1)
		}
		md[pushbackKey] = []string{strconv.FormatInt(v.RetryAfter.Milliseconds(), 10)}
	}
	var st *status.Status
	switch {
	case errors.Is(v.Err, ratelimit.ErrInvalid):
		msg := msgInvalid
		if v.Missing != "" {
			msg = fmt.Sprintf("%s: the metadata %q is missing or empty", msgInvalid, strings.ToLower(v.Missing))
		}
		st = status.New(codes.InvalidArgument, msg)
	case v.Err != nil:
		st = status.New(codes.Unavailable, msgUnavailable)
	default:
		msg := msgDenied
		if v.Decision.Banned > 0 {
			msg = msgBanned
		}
		st = status.New(codes.ResourceExhausted, msg)
		quota := &errdetails.QuotaFailure{}
		for _, res := range v.Decision.Results() {
			if !res.Allowed {
				quota.Violations = append(quota.Violations, &errdetails.QuotaFailure_Violation{Subject: v.Key, QuotaId: res.Limit.Name, Description: res.Limit.String()})
			}
		}
		details = append(details, quota)
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		return md, withDetails.Err()
	}
	return md, st.Err() // a detail that does not marshal; the code and message are what matter
}

// pushbackKey is the trailer that tells a gRPC client's retry policy how
// long to wait before it tries again (gRFC A6).
const pushbackKey = "grpc-retry-pushback-ms"
