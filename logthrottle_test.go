package ratelimit_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
)

// TestLogsAreThrottled: a Limiter logs at most one line a second of each
// kind, however many requests fail.
func TestLogsAreThrottled(t *testing.T) {
	var logs bytes.Buffer
	var seen counts
	l := newLimiter(t, failing{errors.New("down")}, "test", ratelimit.WithLimits(ratelimit.PerMinute(1)), ratelimit.WithObserver(seen.observe),
		ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	for range 100 {
		serve(h, "GET", "/")
	}
	for range 100 {
		serve(h, "GET", "/", func(r *http.Request) { r.RemoteAddr = "@" }) // no key
	}
	for _, msg := range []string{"store failed", "request not decided"} {
		if n := strings.Count(logs.String(), msg); n < 1 || n > 2 {
			t.Errorf("100 failures within a second logged %d lines %q, want 1 (2 if a second turned)", n, msg)
		}
	}
	if errs, bad := seen.of("store_error"), seen.of("bad_request"); errs != 100 || bad != 100 {
		t.Errorf("observed %d store errors and %d bad requests, want 100 of each: the lines held back are still observed", errs, bad)
	}
}
