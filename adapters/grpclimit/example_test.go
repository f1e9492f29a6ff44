package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/grpclimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// A server whose health check has limits of its own, and a client that
// reads the rate-limit metadata and, once denied, the details of the
// denial.
func Example() {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		panic(err)
	}
	limiter, err := ratelimit.New(s, "api",
		ratelimit.WithLimits(ratelimit.PerMinute(100)), // per peer IP by default
		grpclimit.Methods(map[string][]ratelimit.Limit{
			"/grpc.health.v1.Health/Check": {ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("health")},
		}),
	)
	if err != nil {
		panic(err)
	}
	server := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(limiter)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(limiter)),
	)
	healthpb.RegisterHealthServer(server, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go server.Serve(lis)
	defer server.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 3 {
		var header metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		st := status.Convert(err)
		fmt.Println(st.Code(), header.Get("ratelimit-policy"))
		if err != nil {
			fmt.Println(st.Message())
		}
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("retry within the minute:", d.GetRetryDelay().AsDuration() <= time.Minute)
			case *errdetails.QuotaFailure:
				fmt.Println("denied by:", d.GetViolations()[0].GetQuotaId())
			}
		}
	}
	// Output:
	// OK ["health";q=2;w=60]
	// OK ["health";q=2;w=60]
	// ResourceExhausted ["health";q=2;w=60]
	// rate limit exceeded
	// retry within the minute: true
	// denied by: health
}
