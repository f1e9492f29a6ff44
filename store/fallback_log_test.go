package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
)

// refusedDial returns a port nothing listens on, and the error of
// dialing it.
func refusedDial(t *testing.T) (addr string, err error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
		t.Fatalf("%s answered after its listener closed", addr)
	}
	return addr, err
}

func TestCauseOf(t *testing.T) {
	_, refused := refusedDial(t)
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"a refused dial", refused, "connection refused"},
		{"a refused dial, wrapped", fmt.Errorf("ratelimit: redis: deciding key #1: %w", refused), "connection refused"},
		{"a deadline after a refused dial", &cutShort{ctx: context.DeadlineExceeded, cause: refused}, "connection refused"},
		{"a deadline", fmt.Errorf("ratelimit: redis: deciding key #1: %w", context.DeadlineExceeded), "timeout"},
		{"a reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, "connection reset by peer"},
		{"a lost answer", io.ErrUnexpectedEOF, "connection closed"},
		{"no such host", &net.DNSError{Err: "no such host", Name: "redis.invalid", IsNotFound: true}, "no such host"},
		{"a closed client", redis.ErrClosed, "connection closed"},
		{"Redis loading", reply("LOADING Redis is loading the dataset in memory"), "Redis answered LOADING"},
		{"a wrong password", misconfigured(reply("WRONGPASS invalid username-password pair or user is disabled."), "rl:", false), "Redis rejected the client's username or password"},
		{"something else", errors.New("ratelimit: redis: a surprise"), "unavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := causeOf(tt.err); got != tt.want {
				t.Errorf("causeOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// reply is an error Redis answered.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// goRedisLines counts the lines go-redis logs that hold one of its
// strings.
type goRedisLines struct {
	holding []string
	n       atomic.Int64
	mu      sync.Mutex
	lines   []string
}

func (g *goRedisLines) Printf(ctx context.Context, format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	for _, s := range g.holding {
		if strings.Contains(line, s) {
			g.n.Add(1)
			g.mu.Lock()
			g.lines = append(g.lines, line)
			g.mu.Unlock()
			return
		}
	}
}

// TestFallbackQuietWhileRedisUnreachable starts a Fallback on a port
// nothing listens on, as the README's quick start would be during an
// outage, and lets it probe for a few rounds: it logs one line, a WARN
// whose cause is the refused connection, and its probes have go-redis log
// nothing (before, each round logged a failed dial and a failure to
// register maintenance-notification handlers).
func TestFallbackQuietWhileRedisUnreachable(t *testing.T) {
	addr, _ := refusedDial(t)
	lines := &goRedisLines{holding: []string{addr, "maintnotifications"}}
	goRedisLog.sink.Store(lines)
	t.Cleanup(func() { goRedisLog.sink.Store(nil) })

	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s := newStore(t, client, RedisOptions{Logger: logger})
	f, err := NewFallback(s, FallbackOptions{ProbeInterval: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	var rounds atomic.Int64
	f.impl.OnProbe(func(time.Time, bool) { rounds.Add(1) })
	t.Cleanup(func() { f.Close() })
	// The first decision fails as the quick start's did: through the
	// store's client, within the budget.
	if _, err := f.Allow(context.Background(), "k", 1, limitsOf(t, ratelimit.PerMinute(10))); err != nil {
		t.Fatalf("Allow: %v", err)
	}
	const want = 20
	waitFor(t, fmt.Sprint(want, " probe rounds"), func() bool { return rounds.Load() >= want })
	f.Close()
	// The store's client's own dials, for that decision, are go-redis's
	// to log, five attempts a line; the probes dial once and log none.
	probes := 0
	lines.mu.Lock()
	for _, l := range lines.lines {
		if !strings.Contains(l, "after 5 attempts") {
			probes++
			t.Errorf("go-redis logged for a probe: %s", l)
		}
	}
	lines.mu.Unlock()
	store := strings.Split(strings.TrimSpace(logs.String()), "\n")
	t.Logf("%d probe rounds; the store logged %d lines, go-redis %d (%d for the probes):\n%s", rounds.Load(), len(store), lines.n.Load(), probes, logs.String())
	if len(store) != 1 || !strings.Contains(store[0], "level=WARN") || !strings.Contains(store[0], `cause="connection refused"`) {
		t.Errorf("the store logged:\n%s\nwant one WARN with cause=\"connection refused\"", logs.String())
	}
}
