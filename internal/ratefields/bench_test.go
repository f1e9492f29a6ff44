package ratefields_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/ratefields"
)

// BenchmarkParse parses a typical draft 11 response, as this module's
// Limiter sends it for a route of two limits: what a client's transport
// pays on every response.
func BenchmarkParse(b *testing.B) {
	h := http.Header{
		"Ratelimit-Policy":      {`"api-second";q=10;w=1, "api-hour";q=1000;w=3600`},
		"Ratelimit":             {`"api-second";r=9;t=1, "api-hour";r=999;t=3263`},
		"X-Ratelimit-Limit":     {"10"},
		"X-Ratelimit-Remaining": {"9"},
		"X-Ratelimit-Reset":     {"1"},
		"Content-Type":          {"application/json"},
	}
	now := time.Date(2026, 11, 25, 14, 35, 37, 0, time.UTC)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			info, problems := ratefields.Parse(h, http.StatusOK, nil, now, time.Hour)
			if len(info.Limits) != 2 || len(problems) != 0 {
				b.Fatalf("got %+v, %v", info, problems)
			}
		}
	})
}
