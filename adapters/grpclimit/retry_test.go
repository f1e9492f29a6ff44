package grpclimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/grpclimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// gRPC clients' own retry policies against a limited method: grpc-go's
// and Python grpcio's, each configured as their users configure them, a
// service config whose retryPolicy makes RESOURCE_EXHAUSTED retryable
// with 5 attempts. A refusal sent Trailers-Only with
// grpc-retry-pushback-ms is retried after the server's delay, so that
// under contention at most one refused attempt is made per admitted call.

// retryServiceConfig is the service config a gRPC user writes to retry
// refused calls of the TestService (gRFC A6).
const retryServiceConfig = `{"methodConfig": [{
  "name": [{"service": "grpc.testing.TestService"}],
  "retryPolicy": {
    "maxAttempts": 5,
    "initialBackoff": "0.1s",
    "maxBackoff": "1s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]
  }
}]}`

// attempts records, at the server, in front of the Limiter, every
// attempt of every call, by the call's "x-call" metadata: when it came,
// and, when refused, when and with which RetryInfo delay.
type attempts struct {
	mu    sync.Mutex
	calls map[string][]attempt
}

type attempt struct {
	at, refusedAt time.Time
	previous      int           // grpc-previous-rpc-attempts, as the client sent it
	pushback      time.Duration // RetryInfo's delay, when refused
	refused       bool
}

func (a *attempts) record(ctx context.Context, run func(ctx context.Context) error) error {
	at := time.Now()
	md, _ := metadata.FromIncomingContext(ctx)
	id := ""
	if v := md.Get("x-call"); len(v) > 0 {
		id = v[0]
	}
	prev := 0
	if v := md.Get("grpc-previous-rpc-attempts"); len(v) > 0 {
		prev, _ = strconv.Atoi(v[0])
	}
	err := run(ctx)
	e := attempt{at: at, previous: prev}
	if st, ok := status.FromError(err); ok && st.Code() == codes.ResourceExhausted {
		e.refused, e.refusedAt = true, time.Now()
		for _, d := range st.Details() {
			if r, ok := d.(*errdetails.RetryInfo); ok {
				e.pushback = r.GetRetryDelay().AsDuration()
			}
		}
	}
	a.mu.Lock()
	a.calls[id] = append(a.calls[id], e)
	a.mu.Unlock()
	return err
}

// retryRig is a server of the TestService on loopback, with the
// interceptors of a Limiter of limit on a real redis-server, behind an
// attempts recorder.
func retryRig(t *testing.T, limit ratelimit.Limit) (addr string, a *attempts) {
	t.Helper()
	srv := redistest.Require(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: fmt.Sprintf("grpc-retry-%d:", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	l := newLimiterOn(t, s, ratelimit.WithLimits(limit), ratelimit.WithKey(func(ratelimit.Request) (string, error) { return "all", nil }))
	a = &attempts{calls: map[string][]attempt{}}
	server := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
			err = a.record(ctx, func(ctx context.Context) error { resp, err = handler(ctx, req); return err })
			return resp, err
		}, grpclimit.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return a.record(ss.Context(), func(context.Context) error { return handler(srv, ss) })
		}, grpclimit.StreamServerInterceptor(l)),
	)
	testpb.RegisterTestServiceServer(server, &service{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go server.Serve(lis)
	t.Cleanup(server.Stop)
	return lis.Addr().String(), a
}

// retryReport is what the server saw: attempts, admitted calls, refused
// attempts, and retries (attempts a client sent again).
type retryReport struct {
	attempts, admitted, refused, retries int
}

// check reports what the server saw and fails t where a client retried
// before the pushback it was given, or where more than one attempt was
// refused per admitted call.
func (a *attempts) check(t *testing.T, who string) retryReport {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var r retryReport
	early := 0
	for _, tries := range a.calls {
		for i, e := range tries {
			r.attempts++
			if e.refused {
				r.refused++
			} else {
				r.admitted++
			}
			if e.previous > 0 {
				r.retries++
			}
			// The refusal's time is taken before its trailer is sent, so
			// the client's wait starts later; but grpcio's timers run on
			// a clock it reads once per batch of work, in whole
			// milliseconds, which can lag the trailer's arrival by a few
			// (1.3ms seen): a retry counts as early only 10ms before its
			// pushback, which tells a client that waits for it from one
			// that backs off on its own (0.1s here) or not at all.
			if i > 0 && tries[i-1].refused && e.at.Sub(tries[i-1].refusedAt) < tries[i-1].pushback-retryClockSlack {
				early++
				if early == 1 {
					t.Errorf("%s: attempt %d came %v after the refusal of the one before, whose pushback was %v", who, i+1, e.at.Sub(tries[i-1].refusedAt), tries[i-1].pushback)
				}
			}
		}
	}
	perAdmitted := float64(r.refused) / float64(max(r.admitted, 1))
	t.Logf("%s: %d attempts, %d admitted, %d refused (%.2f per admitted), %d retries, %d before their pushback", who, r.attempts, r.admitted, r.refused, perAdmitted, r.retries, early)
	switch {
	case r.admitted == 0:
		t.Errorf("%s: nothing admitted", who)
	case r.retries == 0:
		t.Errorf("%s: no refused call was retried: the client's retry policy did not see a retryable refusal", who)
	case perAdmitted > 1:
		t.Errorf("%s: %.2f refused attempts per admitted call, want at most 1", who, perAdmitted)
	}
	return r
}

// retryClockSlack is how much earlier than its pushback a retry may
// come, for the clients' clocks (see check).
const retryClockSlack = 10 * time.Millisecond

// retryLoad is how long clients call, and the limit they call under: 10
// calls per 2s, for 6s with the long runs on, 4s otherwise.
func retryLoad() (time.Duration, ratelimit.Limit) {
	limit := ratelimit.Limit{Quota: 10, Window: 2 * time.Second}.Named("calls")
	if os.Getenv(redistest.FaultsEnv) == "1" {
		return 6 * time.Second, limit
	}
	return 4 * time.Second, limit
}

// TestRetryPolicyGo: eight workers of grpc-go's client, with the
// standard retryPolicy, call unary and server-streaming methods back to
// back against one limit: every refusal is retried after its pushback,
// and at most one attempt is refused per admitted call.
func TestRetryPolicyGo(t *testing.T) {
	t.Parallel()
	d, limit := retryLoad()
	addr, a := retryRig(t, limit)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(retryServiceConfig))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := testpb.NewTestServiceClient(conn)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	for w := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				ctx := metadata.AppendToOutgoingContext(context.Background(), "x-call", fmt.Sprint(w, "-", i))
				var err error
				if i%2 == 0 {
					_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{})
				} else {
					var s grpc.ServerStreamingClient[testpb.StreamingOutputCallResponse]
					if s, err = client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{}); err == nil {
						_, _, err = drain(s, s.Recv)
					}
				}
				mu.Lock()
				codesSeen[status.Code(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("grpc-go: the calls ended %v", codesSeen)
	for c := range codesSeen {
		if c != codes.OK && c != codes.ResourceExhausted {
			t.Errorf("a call ended %v", c)
		}
	}
	a.check(t, "grpc-go")
}

// pythonGRPC returns a Python 3 that imports grpc (Debian's
// python3-grpcio), or skips t with the reason; with RATELIMIT_REQUIRE_GRPCIO=1,
// as CI runs, it fails t instead.
func pythonGRPC(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import grpc").Run() == nil {
			return py
		}
	}
	if os.Getenv("RATELIMIT_REQUIRE_GRPCIO") == "1" {
		t.Fatal("no python3 with grpcio, and RATELIMIT_REQUIRE_GRPCIO=1: install Debian's python3-grpcio")
	}
	t.Skip("no python3 with grpcio (Debian's python3-grpcio); set RATELIMIT_REQUIRE_GRPCIO=1 to fail instead")
	return ""
}

// TestRetryPolicyPython: eight threads of Python grpcio's client, with the
// same retryPolicy, as TestRetryPolicyGo.
func TestRetryPolicyPython(t *testing.T) {
	t.Parallel()
	py := pythonGRPC(t)
	d, limit := retryLoad()
	addr, a := retryRig(t, limit)
	cmd := exec.Command(py, "testdata/retry_client.py", addr, retryServiceConfig, strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Python client: %v: %s", err, stderr.String())
	}
	var ended map[string]int
	if err := json.Unmarshal(out, &ended); err != nil {
		t.Fatalf("the Python client printed %q: %v", out, err)
	}
	t.Logf("grpcio %s: the calls ended %v", strings.TrimSpace(stderr.String()), ended)
	for c := range ended {
		if c != "OK" && c != "RESOURCE_EXHAUSTED" {
			t.Errorf("a call ended %s", c)
		}
	}
	a.check(t, "grpcio")
}
