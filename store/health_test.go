package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/redistest"
)

// TestFallbackHealth follows a Fallback on a real redis-server through an
// outage and back: Health and its handler say where decisions are made
// and since when, name the failure without its text, and always answer
// 200; Stats counts the outage and the recovery.
func TestFallbackHealth(t *testing.T) {
	checkLeaks(t, redisRedial)
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	made := time.Now()
	f, err := NewFallback(newStore(t, client, RedisOptions{}), FallbackOptions{Budget: time.Second, ProbeInterval: 20 * time.Millisecond, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ctx := context.Background()
	l := limitsOf(t, ratelimit.Limit{Quota: 3, Window: time.Hour}.Using(ratelimit.FixedWindow))

	h := f.Health()
	if !h.OnRedis || h.LastError != nil || h.Since.Before(made.Add(-time.Second)) || h.Since.After(time.Now()) {
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
	if h.OnRedis || h.LastError == nil || h.Since.Before(killed) || h.LastErrorAt.Before(killed) {
		t.Fatalf("Redis down: got %+v, want in process since the kill, with its error", h)
	}
	body := checkHealthBody(t, f, "in_process", "unavailable")
	if _, port, _ := strings.Cut(srv.Addr, ":"); strings.Contains(body, port) {
		t.Errorf("the health body shows the server's address: %s", body)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the probe to find Redis back", func() bool { return f.Health().OnRedis })
	h = f.Health()
	if h.Since.Before(h.LastErrorAt) || h.LastError == nil {
		t.Errorf("Redis back: got %+v, want on Redis since after the last error, which stays", h)
	}
	checkHealthBody(t, f, "redis", "unavailable")
	if s := f.Stats(); s.Outages != 1 || s.Recoveries != 1 {
		t.Errorf("Stats() = %+v, want 1 outage and 1 recovery", s)
	}
}

// checkHealthBody gets f's health handler and checks its status, its
// decisions and last_error, and that since parses; it returns the body.
func checkHealthBody(t *testing.T, f *Fallback, decisions, lastError string) string {
	t.Helper()
	w := httptest.NewRecorder()
	f.HealthHandler().ServeHTTP(w, httptest.NewRequest("GET", "/ratelimit/health", nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("health handler: got %d, %q; want 200, application/json", w.Code, w.Header().Get("Content-Type"))
	}
	var got struct {
		Decisions   string     `json:"decisions"`
		Since       time.Time  `json:"since"`
		LastError   string     `json:"last_error"`
		LastErrorAt *time.Time `json:"last_error_at"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("health body %q: %v", w.Body, err)
	}
	if got.Decisions != decisions || got.LastError != lastError || got.Since.IsZero() || (lastError == "") != (got.LastErrorAt == nil) {
		t.Errorf("health body %s: want decisions %q, last_error %q", w.Body, decisions, lastError)
	}
	return w.Body.String()
}

func TestDescribeFailure(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dial tcp 10.0.0.7:6379: %w", context.DeadlineExceeded), "timeout"},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, "timeout"},
		{errors.New("dial tcp 10.0.0.7:6379: connect: connection refused"), "unavailable"},
		{&ConfigError{Problem: "the ACL user may not run EVALSHA", Fix: "grant it", Err: errors.New("NOPERM user rl has no permissions (key rl:{secret})")}, "misconfigured: the ACL user may not run EVALSHA"},
	} {
		if got := describeFailure(tt.err); got != tt.want {
			t.Errorf("describeFailure(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
