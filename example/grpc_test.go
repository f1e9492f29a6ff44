package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestGRPCGenerate: the example's gRPC twin of POST /v1/generate
// (-grpc) spends the same budget as the route, for the same API key:
// a call answers its tokens with the RateLimit fields as metadata, the
// route's next response counts the call, and once gen-rpm's 20 are spent
// by calls and requests together, the next call is ResourceExhausted
// with the retry delay and gen-rpm named, and the next request 429;
// the tokens of each call are charged to gen-tpm; a call out of bounds
// or without a key counts nowhere.
func TestGRPCGenerate(t *testing.T) {
	t.Parallel()
	bin := build(t)["net/http"]
	u, out := startWith(t, nil, bin, "-grpc", "127.0.0.1:0")
	var addr string
	re := regexp.MustCompile(`grpc: \S+ on (\S+),`)
	for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("the server did not say where it serves gRPC:\n%s", out())
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(key string, tokens float64) (*structpb.Struct, metadata.MD, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
		}
		in, _ := structpb.NewStruct(map[string]any{"tokens": tokens, "hold_ms": 0})
		reply, header := new(structpb.Struct), metadata.MD{}
		err := conn.Invoke(ctx, "/ratelimit.example.Generator/Generate", in, reply, grpc.Header(&header))
		return reply, header, err
	}

	reply, header, err := call("g1", 100)
	if err != nil || reply.GetFields()["tokens"].GetNumberValue() != 100 {
		t.Fatalf("the first call: %v, %v", reply, err)
	}
	if got := strings.Join(header.Get("ratelimit"), ", "); !strings.HasPrefix(rateLimitItem(got, "gen-rpm"), `"gen-rpm";r=19;`) {
		t.Errorf("the first call's ratelimit metadata: %q, want gen-rpm with 19 left", got)
	}
	r := generate(t, u, "g1", 100)
	if got := rateLimitItem(r.Header.Get("RateLimit"), "gen-rpm"); !strings.HasPrefix(got, `"gen-rpm";r=18;`) {
		t.Errorf("a request after the call: RateLimit gen-rpm %q, want 18 left", got)
	}
	for _, bad := range []float64{-1, 100_001, 1.5} {
		if _, _, err := call("g1", bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("tokens %v: got %v, want InvalidArgument", bad, err)
		}
	}
	if _, _, err := call("", 1); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no key: got %v, want InvalidArgument", err)
	}
	for i := range 18 {
		if _, _, err := call("g1", 100); err != nil {
			t.Fatalf("call %d of the 20: %v", i+3, err)
		}
	}
	_, _, err = call("g1", 100)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("the 21st: got %v, want ResourceExhausted", err)
	}
	var retry time.Duration
	var violated []string
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d.GetRetryDelay().AsDuration()
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				violated = append(violated, v.GetQuotaId())
			}
		}
	}
	if retry <= 0 || retry > time.Minute || strings.Join(violated, ",") != "gen-rpm" {
		t.Errorf("the 21st's details: retry %v, violated %v; want a retry within a minute, gen-rpm", retry, violated)
	}
	if r := generate(t, u, "g1", 100); r.StatusCode != 429 {
		t.Errorf("a request after the 21st call: %d, want 429", r.StatusCode)
	}
	q := genQuota(t, u, "g1")
	if got := q["gen-tpm"].Remaining; got != 40_000-20*100 {
		t.Errorf("gen-tpm left: %d, want %d: the 19 calls and the request admitted charged 100 each", got, 40_000-20*100)
	}
	if got := q["gen-rpm"].Remaining; got != 0 {
		t.Errorf("gen-rpm left: %d, want 0", got)
	}
}
