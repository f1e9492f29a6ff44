package grpclimit

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/framework"
)

// An Option configures [UnaryServerInterceptor] and
// [StreamServerInterceptor].
type Option func(*config)

type config struct {
	skip func(ctx context.Context, fullMethod string) bool
}

// WithSkipper exempts the calls for which skip returns true, such as
// health checks ("/grpc.health.v1.Health/Check"): they go on with no
// check and no metadata. skip is given the call's context and its full
// method, "/package.Service/Method", and is called for every call,
// concurrently. By default no call is exempt.
func WithSkipper(skip func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) { c.skip = skip }
}

// UnaryServerInterceptor returns an interceptor that lets l decide each
// unary call, as l decides an HTTP request (see the package's
// documentation for the request l sees). A call l admits goes on to the
// handler with a context that carries the decision (see
// [ratelimit.Decisions] and [ratelimit.Charge]); its code, as an HTTP
// status, goes to l.Finish (for [ratelimit.WithCountOnly]) when the
// handler returns; and once it has returned, however it returns (an
// error, a client gone away, a panic, which goes on to the interceptors
// before this one, after a Finish with 500), l.End gives back its slots
// and charges its usage. A call l denies or cannot decide gets the error
// of l's answer, without the handler (see the package's documentation).
// The rate-limit fields l set are sent as header metadata, or, for a
// refusal, sent Trailers-Only, as trailer metadata with the retry delay
// under grpc-retry-pushback-ms (see the package's documentation).
//
// It panics, when the server is built, if l is nil. The interceptor is
// safe for concurrent use.
func UnaryServerInterceptor(l *ratelimit.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	ic := newInterceptor("UnaryServerInterceptor", l, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if ic.skip != nil && ic.skip(ctx, info.FullMethod) {
			return handler(ctx, req)
		}
		c, decided, ok := ic.decide(ctx, info.FullMethod)
		if !ok {
			md, err := c.refusal(decided)
			grpc.SetTrailer(ctx, md) // fails only outside a server: nowhere to put it
			ic.release(c)
			return nil, err
		}
		if md := c.metadata(); md != nil {
			grpc.SetHeader(ctx, md) // fails only outside a server or once an interceptor before sent the header: nowhere to put it
		}
		f := framework.Finisher{Limiter: l, Request: decided}
		defer ic.end(c, &f)
		resp, err := handler(decided.Context(), req)
		f.Finish(httpStatus(err))
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor that lets l decide each
// stream once, when it opens, as [UnaryServerInterceptor] decides a
// call: the handler gets a stream whose Context carries the decision,
// l.Finish the code it returns, and l.End runs once it has returned,
// however it returns. The rate-limit fields are set as the stream's
// header metadata, sent with its first message or its end.
//
// It panics, when the server is built, if l is nil. The interceptor is
// safe for concurrent use.
func StreamServerInterceptor(l *ratelimit.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	ic := newInterceptor("StreamServerInterceptor", l, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		if ic.skip != nil && ic.skip(ctx, info.FullMethod) {
			return handler(srv, ss)
		}
		c, decided, ok := ic.decide(ctx, info.FullMethod)
		if !ok {
			md, err := c.refusal(decided)
			ss.SetTrailer(md)
			ic.release(c)
			return err
		}
		if md := c.metadata(); md != nil {
			ss.SetHeader(md) // fails only once an interceptor before sent the header: nowhere to put it
		}
		f := framework.Finisher{Limiter: l, Request: decided}
		defer ic.end(c, &f)
		if decided.Context() != ctx {
			ss = &decidedStream{ServerStream: ss, ctx: decided.Context()}
		}
		err := handler(srv, ss)
		f.Finish(httpStatus(err))
		return err
	}
}

// decidedStream is a stream whose Context carries the decision.
type decidedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *decidedStream) Context() context.Context { return s.ctx }

// interceptor is what both interceptors share: the Limiter, the options,
// and the calls their requests are made in.
type interceptor struct {
	config
	l     *ratelimit.Limiter
	calls sync.Pool // of *call
}

func newInterceptor(name string, l *ratelimit.Limiter, opts []Option) *interceptor {
	if l == nil {
		panic("grpclimit: " + name + ": the Limiter is nil")
	}
	ic := &interceptor{l: l}
	for _, opt := range opts {
		opt(&ic.config)
	}
	ic.calls.New = func() any { return &call{header: http.Header{}, w: recorder{header: http.Header{}}} }
	return ic
}

// A call is what the Limiter sees of a gRPC call: the parts of its
// request, and the recorder of its answer.
type call struct {
	url    url.URL
	header http.Header // the request's: the call's metadata
	w      recorder
	// first reports that no Limiter decided the call before this one:
	// the call is then the last whose recorder the Limiters write to,
	// and goes back to the pool once it ends.
	first bool
}

// decide lets the Limiter decide the call of fullMethod whose context is
// ctx, as it decides the request [request] makes of it, and returns the
// call, the request decided, and whether the call may go on.
func (ic *interceptor) decide(ctx context.Context, fullMethod string) (*call, *http.Request, bool) {
	c := ic.calls.Get().(*call)
	c.first = len(ratelimit.Decisions(ctx)) == 0
	decided, ok := ic.l.Allow(&c.w, c.request(ctx, fullMethod))
	return c, decided, ok
}

// end ends the call the handler returned from, or panicked in, for the
// Limiter: Finish with 500 after a panic (the code a recovering
// interceptor sends), then End.
func (ic *interceptor) end(c *call, f *framework.Finisher) {
	f.Finish(http.StatusInternalServerError) // nothing when the handler returned: it was told then
	ic.l.End(f.Request)
	ic.release(c)
}

// release puts c back in the pool when no Limiter can write to it any
// more. A Limiter that decided the call before this one writes to the
// recorder of the last one (ratelimit.Charge, Finish) until it ends the
// call itself, after this one: that recorder is left to the collector.
func (ic *interceptor) release(c *call) {
	if !c.first {
		return
	}
	c.url = url.URL{}
	clear(c.header)
	c.w.reset()
	ic.calls.Put(c)
}

// request returns the request the Limiter decides for the call of
// fullMethod whose context is ctx: POST of the path fullMethod, over
// HTTP/2, from the peer's address, to the call's :authority, with the
// call's metadata as its header, each key written the HTTP way
// ("x-api-key" as "X-Api-Key"), but for binary ("-bin") keys and
// pseudo-headers.
func (c *call) request(ctx context.Context, fullMethod string) *http.Request {
	md, _ := metadata.FromIncomingContext(ctx) // a copy: its values are the header's
	host := ""
	for k, v := range md {
		switch {
		case k == ":authority" && len(v) > 0:
			host = v[0]
		case strings.HasPrefix(k, ":"), strings.HasSuffix(k, "-bin"):
		default:
			c.header[http.CanonicalHeaderKey(k)] = v
		}
	}
	remote := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	c.url.Path = fullMethod
	r := http.Request{
		Method:     http.MethodPost,
		URL:        &c.url,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     c.header,
		Host:       host,
		RemoteAddr: remote,
	}
	return r.WithContext(ctx)
}

// metadata returns the rate-limit fields the Limiter set, as header
// metadata, or nil when it set none.
func (c *call) metadata() metadata.MD {
	var md metadata.MD
	for _, f := range [...]struct{ header, key string }{
		{"Ratelimit", "ratelimit"},
		{"Ratelimit-Policy", "ratelimit-policy"},
		{"Retry-After", "retry-after"},
	} {
		if v := c.w.header[f.header]; len(v) > 0 {
			if md == nil {
				md = make(metadata.MD, 3)
			}
			md[f.key] = append([]string(nil), v...) // the Limiter may write anew in place
		}
	}
	return md
}

// The messages of refused calls: fixed, so that no error's text reaches
// a client.
const (
	msgDenied      = "rate limit exceeded"
	msgBanned      = "banned after repeated denials"
	msgUnavailable = "rate limiting is unavailable"
	msgInvalid     = "the call cannot be rate limited"
	msgRefused     = "refused by the rate limiter"
)

// refusal is the error of a call the Limiter refused, decided as
// decided, by the answer it recorded, and the trailer metadata to send
// with it: the rate-limit fields the Limiter set and, when the answer
// says when to retry, grpc-retry-pushback-ms, the delay of its RetryInfo
// in milliseconds, which gRPC clients' retry policies wait for (gRFC
// A6). For a denial (429) the error is ResourceExhausted with the
// details RetryInfo, the Retry-After the Limiter set, and QuotaFailure,
// a violation per policy that denied; for the error handlers' answers,
// Unavailable (503, the store failed) and InvalidArgument (400, no key
// or an invalid cost), with RetryInfo when the answer has a Retry-After;
// another status, from a deny or error handler of the application's, as
// grpc-gateway maps it, Unknown when it does not. The interceptors send
// a refusal Trailers-Only: with no header before it, a call refused is
// not committed, and a client's retry policy may send it again.
func (c *call) refusal(decided *http.Request) (metadata.MD, error) {
	var st *status.Status
	var retry *durationpb.Duration
	var quota *errdetails.QuotaFailure
	switch c.w.status {
	case http.StatusTooManyRequests:
		msg := msgDenied
		ds := ratelimit.Decisions(decided.Context())
		var d ratelimit.Decision // the denial: this Limiter's, the last
		if len(ds) > 0 {
			d = ds[len(ds)-1]
		}
		if d.Banned > 0 {
			msg = msgBanned
		}
		st = status.New(codes.ResourceExhausted, msg)
		quota = &errdetails.QuotaFailure{}
		for _, res := range d.Results() {
			if !res.Allowed {
				quota.Violations = append(quota.Violations, &errdetails.QuotaFailure_Violation{QuotaId: res.Limit.Name, Description: res.Limit.String()})
			}
		}
		retry = c.w.retryAfter(d.RetryAfter)
	case http.StatusServiceUnavailable:
		st = status.New(codes.Unavailable, msgUnavailable)
	case http.StatusBadRequest:
		st = status.New(codes.InvalidArgument, msgInvalid)
	default:
		st = status.New(refusalCode(c.w.status), msgRefused)
	}
	if retry == nil {
		retry = c.w.retryAfter(0)
	}
	md := c.metadata()
	if retry != nil {
		if md == nil {
			md = make(metadata.MD, 1)
		}
		md[pushbackKey] = []string{strconv.FormatInt(retry.AsDuration().Milliseconds(), 10)}
	}
	return md, withDetails(st, retry, quota)
}

// pushbackKey is the trailer that tells a gRPC client's retry policy how
// long to wait before it tries again (gRFC A6).
const pushbackKey = "grpc-retry-pushback-ms"

// withDetails returns the error of st with, when they are not nil, a
// RetryInfo of retry and q.
func withDetails(st *status.Status, retry *durationpb.Duration, q *errdetails.QuotaFailure) error {
	var details []protoadapt.MessageV1
	if retry != nil {
		details = append(details, &errdetails.RetryInfo{RetryDelay: retry})
	}
	if q != nil {
		details = append(details, q)
	}
	if len(details) == 0 {
		return st.Err()
	}
	withDetails, err := st.WithDetails(details...)
	if err != nil {
		return st.Err() // a detail that does not marshal; the code and message are what matter
	}
	return withDetails.Err()
}

// A recorder is the ResponseWriter the Limiter answers a call's request
// on: it keeps the header and the status, and drops the body.
type recorder struct {
	header http.Header
	status int
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}

func (w *recorder) reset() {
	clear(w.header)
	w.status = 0
}

// retryAfter is the Retry-After the Limiter set, in seconds as it set
// it, or else, when more than 0, fallback; nil when neither is.
func (w *recorder) retryAfter(fallback time.Duration) *durationpb.Duration {
	if s, err := strconv.Atoi(w.header.Get("Retry-After")); err == nil && s > 0 {
		return durationpb.New(time.Duration(s) * time.Second)
	}
	if fallback > 0 {
		return durationpb.New(fallback)
	}
	return nil
}
