package grpclimit_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/grpclimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// BenchmarkUnaryServerInterceptor is the call path through the unary
// interceptor on the Memory store, without the transport, as
// adaptertest.Benchmark is through the HTTP adapters: 4,096 returning
// peers keyed by IP, allowed, with the metadata a grpc-go client sends.
func BenchmarkUnaryServerInterceptor(b *testing.B) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimit.New(s, "bench", ratelimit.WithLimits(ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow)))
	if err != nil {
		b.Fatal(err)
	}
	intercept := grpclimit.UnaryServerInterceptor(l)
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.testing.TestService/UnaryCall"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	md := metadata.MD{":authority": {"127.0.0.1:50051"}, "content-type": {"application/grpc"}, "user-agent": {"grpc-go/1.80.0"}, "te": {"trailers"}}
	ctxs := make([]context.Context, 4096)
	for i := range ctxs {
		addr := &net.TCPAddr{IP: net.IPv4(10, 0, byte(i/256), byte(i%256)), Port: 1234}
		ctxs[i] = grpc.NewContextWithServerTransportStream(
			peer.NewContext(metadata.NewIncomingContext(context.Background(), md), &peer.Peer{Addr: addr}), headerSink{})
	}
	for _, ctx := range ctxs {
		intercept(ctx, nil, info, handler)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := intercept(ctxs[i%len(ctxs)], nil, info, handler); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// headerSink is a server's stream that drops the header set on it.
type headerSink struct{}

func (headerSink) Method() string               { return "/grpc.testing.TestService/UnaryCall" }
func (headerSink) SetHeader(metadata.MD) error  { return nil }
func (headerSink) SendHeader(metadata.MD) error { return nil }
func (headerSink) SetTrailer(metadata.MD) error { return nil }

// BenchmarkServer is a unary call through a real gRPC server on loopback,
// bare and with the interceptor on the Memory store, one client, so that
// what the interceptor adds shows beside what a call costs anyway.
func BenchmarkServer(b *testing.B) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimit.New(s, "bench", ratelimit.WithLimits(ratelimit.PerMinute(1_000_000_000).Using(ratelimit.FixedWindow)))
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"bare", nil},
		{"interceptor", []grpc.ServerOption{grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(l))}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			srv := grpc.NewServer(tt.opts...)
			testpb.RegisterTestServiceServer(srv, &service{})
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(lis)
			defer srv.Stop()
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			client := testpb.NewTestServiceClient(conn)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.EmptyCall(ctx, &testpb.Empty{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
