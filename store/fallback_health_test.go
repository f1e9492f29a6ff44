package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestFallbackHealth follows a Fallback on a real redis-server through an
// outage and back: Health, and a handler serving it as JSON, say where
// decisions are made and since when, name the failure without its text,
// and always answer 200; Health counts the outage and the recovery.
func TestFallbackHealth(t *testing.T) {
	checkLeaks(t, redisRedial)
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	made := time.Now()
	f, err := NewFallback(newStore(t, client, RedisOptions{}), FallbackOptions{Budget: 10 * time.Second, ProbeInterval: 20 * time.Millisecond, Logger: quietLogger}) // a budget that a refused connection on a loaded machine does not outlast
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ctx := context.Background()
	l := limitsOf(t, ratelimit.Limit{Quota: 3, Window: time.Hour}.Using(ratelimit.FixedWindow))

	h := f.Health()
	if h.Decisions != "redis" || h.LastError != nil || h.LastErrorKind != "" || h.Since.Before(made.Add(-time.Second)) || h.Since.After(time.Now()) {
		t.Fatalf("at start: got %+v, want on Redis since the Fallback was made, no error", h)
	}
	checkHealthBody(t, f, "redis", "")

	if _, err := f.Allow(ctx, "k", 1, l); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	killed := time.Now()
	if d, err := f.Allow(ctx, "k", 1, l); err != nil || !d.Fallback {
		t.Fatalf("Redis down: got %+v, %v; want a decision in process", d, err)
	}
	h = f.Health()
	if h.Decisions != "in_process" || h.LastError == nil || h.LastErrorKind != "unavailable" || h.Since.Before(killed) || h.LastErrorAt.Before(killed) {
		t.Fatalf("Redis down: got %+v, want in process since the kill, with its error", h)
	}
	if h.Waiting != 1 {
		t.Errorf("Redis down: %d keys waiting, want 1: the key decided in process", h.Waiting)
	}
	body := checkHealthBody(t, f, "in_process", "unavailable")
	if _, port, _ := strings.Cut(srv.Addr, ":"); strings.Contains(body, port) {
		t.Errorf("the health body shows the server's address: %s", body)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the probe to find Redis back and hand the key back", func() bool { h := f.Health(); return h.Decisions == "redis" && h.Waiting == 0 })
	h = f.Health()
	if h.Since.Before(h.LastErrorAt) || h.LastError == nil {
		t.Errorf("Redis back: got %+v, want on Redis since after the last error, which stays", h)
	}
	checkHealthBody(t, f, "redis", "unavailable")
	if h := f.Health(); h.Outages != 1 || h.Recoveries != 1 || h.Failures == 0 || h.Local != 1 {
		t.Errorf("Health() = %+v, want 1 outage, 1 recovery, failures, 1 decision in process", h)
	}
}

// healthHandler is the health handler FallbackHealth's doc shows.
func healthHandler(f *Fallback) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(f.Health())
	})
}

// checkHealthBody gets f's health handler and checks its status, its
// decisions and last_error, and that since parses; it returns the body.
func checkHealthBody(t *testing.T, f *Fallback, decisions, lastError string) string {
	t.Helper()
	w := httptest.NewRecorder()
	healthHandler(f).ServeHTTP(w, httptest.NewRequest("GET", "/ratelimit/health", nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("health handler: got %d, %q; want 200, application/json", w.Code, w.Header().Get("Content-Type"))
	}
	var got struct {
		Decisions   string     `json:"decisions"`
		Since       time.Time  `json:"since"`
		LastError   string     `json:"last_error"`
		LastErrorAt *time.Time `json:"last_error_at"`
		Waiting     *int64     `json:"waiting"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("health body %q: %v", w.Body, err)
	}
	if got.Decisions != decisions || got.LastError != lastError || got.Since.IsZero() || (lastError == "") != (got.LastErrorAt == nil) || got.Waiting == nil {
		t.Errorf("health body %s: want decisions %q, last_error %q, and the keys waiting", w.Body, decisions, lastError)
	}
	return w.Body.String()
}

func TestFailureKind(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dial tcp 10.0.0.7:6379: %w", context.DeadlineExceeded), "timeout"},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, "timeout"},
		{errors.New("dial tcp 10.0.0.7:6379: connect: connection refused"), "unavailable"},
		{&misconfiguration{problem: "the ACL user may not run EVALSHA", fix: "grant it", err: errors.New("NOPERM user rl has no permissions (key rl:{secret})")}, "misconfigured: the ACL user may not run EVALSHA"},
		{fmt.Errorf("ratelimit: redis: deciding: %w", errors.Join(&misconfiguration{problem: "the ACL user may not run time", fix: "grant it", err: errors.New("NOPERM")})), "misconfigured: the ACL user may not run time"},
	} {
		if got := (primary{}).Explain(context.Background(), tt.err).Kind(); got != tt.want {
			t.Errorf("the kind of %v: got %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestFallbackHealthJSON: a FallbackHealth marshals to the names the
// health handler serves, with the kind of its last error and never the
// error's text, and leaves last_error_at out while nothing failed.
func TestFallbackHealthJSON(t *testing.T) {
	at := time.Date(2026, 11, 24, 20, 31, 7, 500_000_000, time.UTC)
	for _, tt := range []struct {
		name string
		h    FallbackHealth
		want string
	}{
		{"on Redis, no failure yet", FallbackHealth{Decisions: "redis", Since: at},
			`{"decisions":"redis","since":"2026-11-24T20:31:07.5Z","last_error":"","waiting":0,"local":0,"failures":0,"misconfigured":0,"outages":0,"recoveries":0,"reconciled":0}`},
		{"in process after a misconfiguration", FallbackHealth{
			Decisions: "in_process", Since: at,
			LastError:     &misconfiguration{problem: "the ACL user may not run time", fix: "grant it", err: errors.New("NOPERM user rl:{secret} at 10.0.0.7:6379")},
			LastErrorKind: "misconfigured: the ACL user may not run time", LastErrorAt: at,
			Waiting: 9, Local: 12, Failures: 3, Misconfigured: 2, Outages: 1, Recoveries: 4, Reconciled: 5},
			`{"decisions":"in_process","since":"2026-11-24T20:31:07.5Z","last_error":"misconfigured: the ACL user may not run time","last_error_at":"2026-11-24T20:31:07.5Z","waiting":9,"local":12,"failures":3,"misconfigured":2,"outages":1,"recoveries":4,"reconciled":5}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.h)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if strings.Contains(string(b), "secret") || strings.Contains(string(b), "10.0.0.7") {
				t.Errorf("the JSON shows the error's text: %s", b)
			}
		})
	}
}
