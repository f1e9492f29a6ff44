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
		// An admitted call has the fields in its header; a refused one,
		// sent Trailers-Only so that a retry policy may retry it, in its
		// trailer, with grpc-retry-pushback-ms.
		var header, trailer metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		st := status.Convert(err)
		if err != nil {
			fmt.Println(st.Code(), trailer.Get("ratelimit-policy"), "header:", len(header))
			fmt.Println(st.Message())
		} else {
			fmt.Println(st.Code(), header.Get("ratelimit-policy"))
		}
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				delay := d.GetRetryDelay().AsDuration()
				pushback := fmt.Sprint(delay.Milliseconds())
				fmt.Println("retry within the minute:", delay <= time.Minute, "pushback the same:", trailer.Get("grpc-retry-pushback-ms")[0] == pushback)
			case *errdetails.QuotaFailure:
				fmt.Println("denied by:", d.GetViolations()[0].GetQuotaId())
			}
		}
	}
	// Output:
	// OK ["health";q=2;w=60]
	// OK ["health";q=2;w=60]
	// ResourceExhausted ["health";q=2;w=60] header: 0
	// rate limit exceeded
	// retry within the minute: true pushback the same: true
	// denied by: health
}
