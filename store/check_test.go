package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestCheckTellsMisconfigurationFromOutage runs Check on real
// redis-servers: a misconfiguration (a wrong password, none where one is
// required) matches ErrMisconfigured and says what to fix; Redis
// unreachable (a closed port) or unable to decide now (writes paused)
// does not, and says why, so that a service may start behind a Fallback.
func TestCheckTellsMisconfigurationFromOutage(t *testing.T) {
	t.Parallel()
	closed, _ := refusedDial(t)
	for _, tt := range []struct {
		name      string
		client    func(t *testing.T) *redis.Options
		misconfig bool
		want      string // in the error; "" for no error
	}{
		{"healthy", func(t *testing.T) *redis.Options {
			return &redis.Options{Addr: redistest.Shared(t).Addr}
		}, false, ""},
		{"a wrong password", func(t *testing.T) *redis.Options {
			return &redis.Options{Addr: withPassword(t), Password: "wrong"}
		}, true, "Redis rejected the client's username or password"},
		{"no password", func(t *testing.T) *redis.Options {
			return &redis.Options{Addr: withPassword(t)}
		}, true, "Redis requires a password and the client gave none"},
		{"a closed port", func(t *testing.T) *redis.Options {
			return &redis.Options{Addr: closed}
		}, false, "Redis cannot decide now (connection refused), and may later: not a misconfiguration"},
		{"writes paused", func(t *testing.T) *redis.Options {
			srv := redistest.Require(t)
			if err := newClient(t, srv.Addr).Do(t.Context(), "CLIENT", "PAUSE", 5000, "WRITE").Err(); err != nil {
				t.Fatal(err)
			}
			return &redis.Options{Addr: srv.Addr}
		}, false, "Redis cannot decide now (timeout), and may later"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := tt.client(t)
			o.ContextTimeoutEnabled = true
			client := redis.NewClient(o)
			t.Cleanup(func() { client.Close() })
			s := newStore(t, client, RedisOptions{Logger: quietLogger})
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err := s.Check(ctx)
			t.Logf("Check: %v", err)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check: %v, want nil", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("Check: nil, want an error holding %q", tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("Check: %v, want it to hold %q", err, tt.want)
			}
			if got := errors.Is(err, ErrMisconfigured); got != tt.misconfig {
				t.Errorf("errors.Is(err, ErrMisconfigured) = %v, want %v", got, tt.misconfig)
			}
		})
	}
}

// withPassword returns the address of a new server that requires a
// password.
func withPassword(t *testing.T) string {
	t.Helper()
	srv := redistest.Require(t)
	if err := newClient(t, srv.Addr).ConfigSet(t.Context(), "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	return srv.Addr
}
