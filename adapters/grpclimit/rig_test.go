package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/grpclimit"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// service is grpc.testing.TestService, each of whose calls does what its
// metadata says before it answers (see behave). UnaryCall and EmptyCall
// are unary; StreamingOutputCall sends two messages; FullDuplexCall
// echoes every message until the client closes.
type service struct {
	testpb.UnimplementedTestServiceServer
	// started, when not nil, is told of each call whose handler runs,
	// with the decisions its context carries, once "x-use" is charged.
	started chan []ratelimit.Decision
}

// behave does what the call whose context is ctx asks in its metadata:
// "x-use: n" charges n units (ratelimit.Charge); "x-fail" ends the call
// with Unauthenticated; "x-panic" panics; "x-stream: n", of
// StreamingOutputCall, sends up to n messages, charging 1 after each; "x-block" waits until the call
// ends, and returns its context's error.
func (s *service) behave(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-use"); len(v) > 0 {
		n, _ := strconv.Atoi(v[0])
		ratelimit.Charge(ctx, n)
	}
	if s.started != nil {
		s.started <- ratelimit.Decisions(ctx) // once charged: a charge past the cost asks the store for more
	}
	switch {
	case len(md.Get("x-fail")) > 0:
		return status.Error(codes.Unauthenticated, "who are you")
	case len(md.Get("x-panic")) > 0:
		panic("the handler failed")
	case len(md.Get("x-block")) > 0:
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *service) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if err := s.behave(ctx); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *service) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	if err := s.behave(ctx); err != nil {
		return nil, err
	}
	return &testpb.Empty{}, nil
}

func (s *service) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	if err := s.behave(stream.Context()); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	if v := md.Get("x-stream"); len(v) > 0 {
		// Up to n messages, charging 1 after each, stopping when told no.
		n, _ := strconv.Atoi(v[0])
		for range n {
			if err := stream.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
				return err
			}
			if !ratelimit.Charge(stream.Context(), 1) {
				return nil
			}
		}
		return nil
	}
	for range 2 {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return nil
}

func (s *service) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	if err := s.behave(stream.Context()); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// userKey is where auth puts the caller's name, for ratelimit.User.
type userKey struct{}

// rig is a gRPC server on loopback serving the TestService and the
// health service, and a client of both.
type rig struct {
	svc    *service
	test   testpb.TestServiceClient
	health healthpb.HealthClient
}

// newRig serves the TestService and the health service with, in front
// of them, a recovery that answers a panic with Internal, an
// authentication that puts the metadata "x-user" in the context under
// userKey, and the interceptors of ls in order, built with opts.
func newRig(t *testing.T, opts []grpclimit.Option, ls ...*ratelimit.Limiter) *rig {
	t.Helper()
	unary := []grpc.UnaryServerInterceptor{recoverUnary, authUnary}
	stream := []grpc.StreamServerInterceptor{recoverStream, authStream}
	for _, l := range ls {
		unary = append(unary, grpclimit.UnaryServerInterceptor(l, opts...))
		stream = append(stream, grpclimit.StreamServerInterceptor(l, opts...))
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	svc := &service{}
	testpb.RegisterTestServiceServer(srv, svc)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rig{svc: svc, test: testpb.NewTestServiceClient(conn), health: healthpb.NewHealthClient(conn)}
}

func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (_ any, err error) {
	defer func() {
		if recover() != nil {
			err = status.Error(codes.Internal, "recovered")
		}
	}()
	return handler(ctx, req)
}

func recoverStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if recover() != nil {
			err = status.Error(codes.Internal, "recovered")
		}
	}()
	return handler(srv, ss)
}

func authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(authenticated(ctx), req)
}

func authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &contextStream{ss, authenticated(ss.Context())})
}

func authenticated(ctx context.Context) context.Context {
	if v := metadata.ValueFromIncomingContext(ctx, "x-user"); len(v) > 0 {
		return context.WithValue(ctx, userKey{}, v[0])
	}
	return ctx
}

type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }

// The kinds of call: one of each of the TestService's unary and
// streaming methods.
const (
	unary  = "UnaryCall"
	stream = "StreamingOutputCall"
	duplex = "FullDuplexCall"
	empty  = "EmptyCall"
	check  = "/grpc.health.v1.Health/Check"
)

// call makes a call of kind with the metadata kv (key, value, ...) and
// returns the rate-limit metadata it got: its header's, or, for a call
// refused before its handler ran, which gets no header, its trailer's;
// and its error. A duplex call sends one message and closes.
func (r *rig) call(ctx context.Context, kind string, kv ...string) (metadata.MD, error) {
	header, trailer, err := r.callFull(ctx, kind, kv...)
	if err != nil && len(header) == 0 {
		return trailer, err
	}
	return header, err
}

// callFull is call, returning the header and the trailer apart.
func (r *rig) callFull(ctx context.Context, kind string, kv ...string) (header, trailer metadata.MD, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	switch kind {
	case unary:
		_, err := r.test.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		return header, trailer, err
	case empty:
		_, err := r.test.EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&header), grpc.Trailer(&trailer))
		return header, trailer, err
	case check:
		_, err := r.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		return header, trailer, err
	case stream:
		s, err := r.test.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err != nil {
			return nil, nil, err
		}
		return drain(s, s.Recv)
	case duplex:
		s, err := r.test.FullDuplexCall(ctx)
		if err != nil {
			return nil, nil, err
		}
		if err := s.Send(&testpb.StreamingOutputCallRequest{}); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		if err := s.CloseSend(); err != nil {
			return nil, nil, err
		}
		return drain(s, s.Recv)
	}
	panic("no call of kind " + kind)
}

// drain receives from s until it ends, and returns its header, its
// trailer and its error.
func drain(s grpc.ClientStream, recv func() (*testpb.StreamingOutputCallResponse, error)) (header, trailer metadata.MD, err error) {
	for err == nil {
		_, err = recv()
	}
	header, _ = s.Header()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return header, s.Trailer(), err
}

// quiet keeps the Limiters' logs out of the test output.
var quiet = ratelimit.WithLogger(slog.New(slog.DiscardHandler))

// newLimiter returns a Limiter of opts on a Redis store on miniredis
// whose clock stands still, so that the fields' times are exact.
func newLimiter(t *testing.T, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	return newLimiterOn(t, adaptertest.NewStore(t), opts...)
}

func newLimiterOn(t *testing.T, s ratelimit.Store, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(s, "test", append([]ratelimit.Option{quiet}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// refused is what a client reads of a refused call's error.
type refused struct {
	code       codes.Code
	msg        string
	retry      time.Duration // RetryInfo's delay; 0: none
	violations []string      // QuotaFailure's violations, QuotaId: Description
}

// refusalOf reads err as a client does.
func refusalOf(err error) refused {
	st, _ := status.FromError(err)
	r := refused{code: st.Code(), msg: st.Message()}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			r.retry = d.GetRetryDelay().AsDuration()
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				r.violations = append(r.violations, v.GetQuotaId()+": "+v.GetDescription())
			}
		}
	}
	return r
}

// within polls cond until it holds or d passes, and reports whether it
// held.
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
