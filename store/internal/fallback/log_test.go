package fallback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// explained is a primary that answers nothing, and explains errors as the
// Redis store would for the two causes the tests use: a timeout, a
// refused connection.
type explained struct{}

func (explained) Decide(context.Context, Call) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.ErrUnsupported
}

func (explained) End(context.Context, Call, int, string) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.ErrUnsupported
}

func (explained) Peek(context.Context, Call) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.ErrUnsupported
}

func (explained) Reset(context.Context, string, *ratelimit.Limits) error {
	return errors.ErrUnsupported
}
func (explained) Probe(context.Context, Probe, func() int64) (int64, error) { return 0, nil }
func (explained) Charge(context.Context, []*Charge, int64)                  {}
func (explained) Forget(string)                                             {}

func (explained) Explain(_ context.Context, err error) Failure {
	if errors.Is(err, context.DeadlineExceeded) {
		return Failure{Fault: Outage, Cause: "timeout"}
	}
	return Failure{Fault: Outage, Cause: "connection refused"}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer = testkit.Buffer

// TestFallbackLogsOnePerCause drives a Fallback's outage lines on a pinned
// clock: one line per cause a minute, whatever the number of outages;
// an outage first seen as a deadline logged with the cause the prober
// found; the next line of a cause counts those held back.
func TestFallbackLogsOnePerCause(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	deadline := fmt.Errorf("ratelimit: redis: deciding key #1: %w", context.DeadlineExceeded)
	var logs syncBuffer
	f, err := New(explained{}, Options{ProbeInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	t0 := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	lines := 0
	for _, step := range []struct {
		name        string
		err, probed error
		at          time.Duration
		want        string // in the line logged; "" for none
	}{
		{"the first outage", refused, nil, 0, `cause="connection refused"`},
		{"the same cause again", refused, nil, 30 * time.Second, ""},
		{"a deadline the prober finds refused", deadline, refused, 31 * time.Second, ""},
		{"a deadline the prober finds a deadline too", deadline, deadline, 32 * time.Second, `cause=timeout`},
		{"a deadline, Redis back at the next probe", deadline, nil, 40 * time.Second, ""},
		{"refused, a minute after the first", refused, nil, 61 * time.Second, `cause="connection refused" error="dial tcp`},
		{"refused, first seen as a deadline", deadline, refused, 130 * time.Second, `first_error="ratelimit: redis: deciding key #1: context deadline exceeded"`},
	} {
		f.logDown(step.err, step.probed, t0.Add(step.at))
		got := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if logs.String() == "" {
			got = nil
		}
		if step.want != "" {
			lines++
		}
		if len(got) != lines {
			t.Fatalf("after %s: %d lines, want %d:\n%s", step.name, len(got), lines, logs.String())
		}
		if step.want != "" && !strings.Contains(got[lines-1], step.want) {
			t.Errorf("after %s: got %s, want it to hold %s", step.name, got[lines-1], step.want)
		}
		if got := f.downLogged.Load(); got != (step.want != "") {
			t.Errorf("after %s: downLogged %v, want %v", step.name, f.downLogged.Load(), step.want != "")
		}
	}
	if got := strings.Split(logs.String(), "\n")[2]; !strings.Contains(got, "outages_not_logged=2") {
		t.Errorf("the line after two held back: got %s, want outages_not_logged=2", got)
	}
}
