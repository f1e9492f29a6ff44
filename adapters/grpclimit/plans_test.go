package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-go/ratelimit"
)

// TestPlansOnEveryAlgorithm: limits per call from WithLimitsFunc, by a
// plan the metadata names (x-plan: pro gets 3, the others 1), on each
// algorithm: each plan's calls pass up to its quota, unary and
// streaming, then are ResourceExhausted, and one plan's calls leave the
// other's alone.
func TestPlansOnEveryAlgorithm(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.SlidingLog, ratelimit.TokenBucket, ratelimit.Daily} {
		for _, kind := range []string{unary, stream} {
			t.Run(alg.String()+"/"+kind, func(t *testing.T) {
				t.Parallel()
				window := time.Hour
				if alg == ratelimit.Daily {
					window = 0
				}
				plan := func(quota int) []ratelimit.Limit {
					return []ratelimit.Limit{{Algorithm: alg, Quota: quota, Window: window, Name: "plan"}}
				}
				r := newRig(t, nil, newLimiter(t,
					ratelimit.WithKey(func(r ratelimit.Request) (string, error) { return "plan:" + planOf(r), nil }),
					ratelimit.WithLimitsFunc(func(r ratelimit.Request) []ratelimit.Limit {
						if planOf(r) == "pro" {
							return plan(3)
						}
						return plan(1)
					})))
				for _, p := range []struct {
					name  string
					quota int
				}{{"free", 1}, {"pro", 3}} {
					for i := range p.quota + 1 {
						_, err := r.call(context.Background(), kind, "x-plan", p.name)
						want := codes.OK
						if i == p.quota {
							want = codes.ResourceExhausted
						}
						if got := status.Code(err); got != want {
							t.Errorf("%s call %d: %v, want %v", p.name, i+1, err, want)
						}
					}
				}
			})
		}
	}
}

// planOf returns the plan a call names in its metadata "x-plan", as a
// function of the application reads it of any Request.
func planOf(r ratelimit.Request) string {
	if h, ok := r.(interface{ Header(string) []string }); ok {
		if v := h.Header("X-Plan"); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
