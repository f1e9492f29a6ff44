package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// healthLog records a Fallback's health changes.
type healthLog struct {
	mu      sync.Mutex
	changes []bool
}

func (h *healthLog) hook(up bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, up)
}

func (h *healthLog) get() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bool(nil), h.changes...)
}

// newFallback returns a Fallback over a fresh miniredis, with a short
// probe interval; opts's zero fields get the test's settings.
func newFallback(t *testing.T, opts FallbackOptions) (*Fallback, *miniredis.Miniredis, *healthLog) {
	t.Helper()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	h := &healthLog{}
	// A long budget: these tests make Redis fail, never slow, and a
	// loaded machine must not turn a slow answer into an outage.
	opts.Budget = cmp.Or(opts.Budget, time.Second)
	opts.ProbeInterval = cmp.Or(opts.ProbeInterval, 20*time.Millisecond)
	if opts.HealthHook == nil {
		opts.HealthHook = h.hook
	}
	opts.Logger = cmp.Or(opts.Logger, quietLogger)
	f, err := NewFallback(newStore(t, client, RedisOptions{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, m, h
}

// waitFor polls cond for up to 5s.
// allowUntil asks s to admit requests of cost 1 for key, one after the
// other, until stop is closed or next returns false; a denied one, then
// next waits a millisecond. It returns at the first error, which fails t.
func allowUntil(t *testing.T, stop <-chan struct{}, s ratelimit.Store, key string, limits *ratelimit.Limits, next func(d ratelimit.Decision) bool) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		d, err := s.Allow(context.Background(), key, 1, limits)
		if err != nil {
			t.Errorf("Allow: %v", err)
			return
		}
		if !d.Allowed {
			time.Sleep(time.Millisecond)
			continue
		}
		if !next(d) {
			return
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// A minute: it returns as soon as cond holds, and under .ci/busy with
	// two CI runs at once a probe and its backlog took over 5s.
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkLeaks fails t if goroutines started during it outlive its
// cleanup, but for those opts ignores.
func checkLeaks(t *testing.T, opts ...goleak.Option) {
	opts = append(opts, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) }) // runs after the other cleanups
}

// redisRedial ignores go-redis's goroutine that dials a dead server again
// after a second, which a closed client does not stop: it ends on its own.
var redisRedial = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")

// TestFallbackLocalConformance runs the conformance suite on Fallbacks
// whose Redis is down from the start, so that every decision, Peek and
// Reset is made in process, for one instance: on the local Memory store's
// pinned clock, with bans, through the backlog.
func TestFallbackLocalConformance(t *testing.T) {
	t.Parallel() // a pinned clock: nothing here depends on the machine's speed
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
		m := miniredis.RunT(t)
		addr := m.Addr()
		m.Close() // nothing answers at its address
		client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { client.Close() })
		clock := testkit.NewClock(epoch, nil)
		f, err := NewFallback(newStore(t, client, RedisOptions{Logger: quietLogger}), FallbackOptions{
			Local:         MemoryOptions{Clock: clock.Now},
			ProbeInterval: time.Hour,
			Logger:        quietLogger,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		f.impl.Fail(errors.New("the test's Redis is down"))
		stores := make([]ratelimit.Store, n)
		for i := range stores {
			stores[i] = f
		}
		return stores, clock
	}})
}

func TestFallbackDownAndBack(t *testing.T) {
	checkLeaks(t)
	f, m, health := newFallback(t, FallbackOptions{})
	ctx := context.Background()
	l := limitsOf(t, ratelimit.Limit{Quota: 3, Window: time.Hour}.Using(ratelimit.FixedWindow))

	d, err := f.Allow(ctx, "k", 1, l)
	if err != nil || d.Fallback || d.Results()[0].Remaining != 2 {
		t.Fatalf("healthy: got %+v, %v; want a Redis decision with 2 remaining", d, err)
	}

	m.Close()
	// Redis had 2 left: the outage starts from there.
	for i, want := range []bool{true, true, false, false} {
		d, err := f.Allow(ctx, "k", 1, l)
		if err != nil {
			t.Fatalf("Redis down, request %d: %v", i, err)
		}
		if !d.Fallback || d.Allowed != want {
			t.Errorf("Redis down, request %d: got %+v, want a local decision, allowed %v", i, d, want)
		}
	}
	if f.Health().Decisions == "redis" {
		t.Error("Health().Decisions = \"redis\" while Redis is down")
	}

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the probe to find Redis back and bring it the backlog", func() bool { return f.Health().Decisions == "redis" && !f.impl.Reconciling() })
	d, err = f.Allow(ctx, "k", 1, l)
	if err != nil || d.Fallback {
		t.Fatalf("Redis back: got %+v, %v; want a Redis decision", d, err)
	}
	if got := health.get(); len(got) != 2 || got[0] || !got[1] {
		t.Errorf("health hook saw %v, want [false true]", got)
	}
	if s := f.Health(); s.Local != 4 || s.Failures != 1 || s.Recoveries != 1 {
		t.Errorf("Health() = %+v, want 4 local decisions, 1 failure, 1 recovery", s)
	}
	// Go down again, so that a probe runs, and leave it to Close: no
	// goroutine may outlive the test.
	m.Close()
	if d, err := f.Allow(ctx, "k2", 1, l); err != nil || !d.Fallback {
		t.Errorf("Redis down again: got %+v, %v; want a local decision", d, err)
	}
}

func TestFallbackDividesLimitsAmongInstances(t *testing.T) {
	f, m, _ := newFallback(t, FallbackOptions{Instances: 4})
	m.Close()
	ctx := context.Background()
	l := ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 10, Window: time.Minute, Burst: 10}
	set := limitsOf(t, l)
	passed := 0
	for range 10 {
		d, err := f.Allow(ctx, "k", 1, set)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			passed++
		}
		if d.Results()[0].Limit != l {
			t.Fatalf("the result names %v, want the limit as given, %v", d.Results()[0].Limit, l)
		}
	}
	if passed != 3 { // ceil(10/4)
		t.Errorf("%d passed in process with 4 instances, want 3", passed)
	}
	d, err := f.Allow(ctx, "k2", 5, set)
	if err != nil || d.Allowed || !d.Fallback || d.RetryAfter <= 0 {
		t.Errorf("a cost above an instance's share: got %+v, %v; want a denial", d, err)
	}
}

func TestFallbackKeepsErrorsThatAreNotOutages(t *testing.T) {
	f, m, _ := newFallback(t, FallbackOptions{})
	ctx := context.Background()
	l := limitsOf(t, ratelimit.PerMinute(10).Using(ratelimit.FixedWindow))

	if _, err := f.Allow(ctx, "", 1, l); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("invalid input: got %v, want ErrInvalid", err)
	}
	m.Set(limitKey(f.redis, "k", l.All()[0]), "not a number")
	if _, err := f.Allow(ctx, "k", 1, l); err == nil {
		t.Error("a key holding a foreign value: got no error")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.Allow(canceled, "other", 1, l); err == nil {
		t.Error("a canceled request: got no error")
	}
	if st := f.Health(); st.Decisions != "redis" || st.Local != 0 {
		t.Errorf("none of these is an outage: Health %+v", st)
	}
}

func TestNewFallbackChecksDeadlines(t *testing.T) {
	m := miniredis.RunT(t)
	deaf := newStore(t, newClient(t, m.Addr()), RedisOptions{}) // ContextTimeoutEnabled is false
	if _, err := NewFallback(deaf, FallbackOptions{}); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("a client ignoring deadlines: got %v, want ErrInvalid", err)
	}
	if _, err := NewFallback(nil, FallbackOptions{}); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("nil: got %v, want ErrInvalid", err)
	}
	for _, opts := range []FallbackOptions{{Budget: -1}, {ProbeInterval: -1}, {Instances: -1}, {MaxBacklog: -1}} {
		client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		if _, err := NewFallback(newStore(t, client, RedisOptions{}), opts); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("bad options %+v: got %v, want ErrInvalid", opts, err)
		}
		client.Close()
	}
	// The zero options are every default.
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	f, err := NewFallback(newStore(t, client, RedisOptions{}), FallbackOptions{})
	if err != nil {
		t.Fatalf("FallbackOptions{}: %v", err)
	}
	defer f.Close()
	// The defaults FallbackOptions documents.
	budget, interval, instances := f.impl.Settings()
	_, maxBacklog, _, _ := f.impl.Sizes("k")
	if budget != 50*time.Millisecond || interval != 500*time.Millisecond || instances != 1 || maxBacklog != 100_000 {
		t.Errorf("FallbackOptions{}: budget %v, probe interval %v, instances %d, backlog %d; want 50ms, 500ms, 1, 100000", budget, interval, instances, maxBacklog)
	}
}

// TestFallbackMemoryIsBounded sends 100,000 distinct limits through a
// Fallback's in-process path, and many resets of distinct keys while
// Redis is down: what the Fallback keeps stays within its bounds. (The
// shares of a set of limits are kept with the set, not by the Fallback.)
func TestFallbackMemoryIsBounded(t *testing.T) {
	f, m, _ := newFallback(t, FallbackOptions{Instances: 3, MaxBacklog: 1000})
	m.Close()
	ctx := context.Background()
	n := 100_000
	for i := range n {
		l := ratelimit.Limit{Quota: 1 + i%1000, Window: time.Duration(1+i/1000) * time.Second}.Using(ratelimit.FixedWindow)
		if _, err := f.Allow(ctx, "k", 1, limitsOf(t, l)); err != nil {
			t.Fatal(err)
		}
	}
	const maxPendingLimits = 16 // the limit states a Fallback keeps per key
	if _, _, got, _ := f.impl.Sizes("k"); got > maxPendingLimits {
		t.Errorf("%d limits: the backlog keeps %d for one key, want at most %d", n, got, maxPendingLimits)
	}
	if _, _, _, got := f.impl.Sizes("k"); got != 1 {
		t.Errorf("%d limits of one key: the Memory store holds %d keys, want 1", n, got)
	}
	l := limitsOf(t, ratelimit.PerMinute(10))
	for i := range 999 { // and "k"'s
		if err := f.Reset(ctx, fmt.Sprintf("k%d", i), l); err != nil {
			t.Fatalf("reset %d: %v", i, err)
		}
	}
	if err := f.Reset(ctx, "one-too-many", l); err == nil {
		t.Error("a reset past the backlog's bound: got no error")
	}
	if err := f.Reset(ctx, "k7", l); err != nil {
		t.Errorf("a second reset of a waiting key: %v", err)
	}
	if got, _, _, _ := f.impl.Sizes(""); got != 1000 {
		t.Errorf("the backlog holds %d keys, want 1000", got)
	}
}

// TestFallbackPeek peeks through a Fallback. With Redis up, Redis
// answers. When Redis fails, a Peek marks it down as Allow would and
// answers in process, with Decision.Fallback set, as the next decision in
// process will: from what Redis last said of the key. And it changes
// nothing: no backlog, no state in process, no decision counted, and the
// decisions that follow are those of a Fallback never peeked at.
func TestFallbackPeek(t *testing.T) {
	f, m, _ := newFallback(t, FallbackOptions{})
	ctx := context.Background()
	l := limitsOf(t, ratelimit.Limit{Quota: 3, Window: time.Hour}.Using(ratelimit.FixedWindow))
	if d, err := f.Allow(ctx, "k", 1, l); err != nil || d.Fallback || d.Results()[0].Remaining != 2 {
		t.Fatalf("healthy: got %+v, %v; want a Redis decision with 2 remaining", d, err)
	}
	if d, err := f.Peek(ctx, "k", 1, l); err != nil || d.Fallback || !d.Allowed || d.Results()[0].Remaining != 2 {
		t.Fatalf("healthy: Peek got %+v, %v; want Redis's answer, allowed with 2 remaining", d, err)
	}

	m.Close()
	for i := range 2 {
		d, err := f.Peek(ctx, "k", 1, l)
		if err != nil || !d.Fallback || !d.Allowed || d.Results()[0].Remaining != 2 {
			t.Errorf("Redis down, Peek %d: got %+v, %v; want an answer in process, allowed with the 2 Redis had left", i, d, err)
		}
	}
	if d, err := f.Peek(ctx, "other", 3, l); err != nil || !d.Fallback || !d.Allowed || d.Results()[0].Remaining != 3 || d.Results()[0].ResetAfter != 0 {
		t.Errorf("Redis down, Peek of a new key: got %+v, %v; want an answer in process, all 3 left", d, err)
	}
	if _, err := f.Peek(ctx, "", 1, l); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Redis down, Peek of an empty key: got %v, want ErrInvalid", err)
	}
	if s := f.Health(); s.Decisions == "redis" || s.Failures != 1 || s.Local != 0 {
		t.Errorf("after the Peeks: Health() = %+v; want Redis down after 1 failure, no decision in process", s)
	}
	if n, _, _, held := f.impl.Sizes("k"); n != 0 || held != 0 {
		t.Errorf("after the Peeks: %d keys in the backlog, %d in process; want none", n, held)
	}

	// As in TestFallbackDownAndBack: 2 left, each foretold by a Peek.
	for i, want := range []bool{true, true, false} {
		p, err := f.Peek(ctx, "k", 1, l)
		if err != nil || !p.Fallback || p.Allowed != want {
			t.Fatalf("Redis down, Peek before request %d: got %+v, %v; want allowed %v", i, p, err, want)
		}
		d, err := f.Allow(ctx, "k", 1, l)
		if err != nil || !d.Fallback || d.Allowed != want {
			t.Fatalf("Redis down, request %d: got %+v, %v; want a local decision, allowed %v", i, d, err, want)
		}
		if want && p.Results()[0].Remaining != d.Results()[0].Remaining+1 {
			t.Errorf("request %d: Peek said %d remaining, the decision left %d; want one less", i, p.Results()[0].Remaining, d.Results()[0].Remaining)
		}
	}
	if s := f.Health(); s.Local != 3 {
		t.Errorf("Health().Local = %d, want the 3 decisions and no Peek", s.Local)
	}

	t.Run("share", func(t *testing.T) {
		f, m, _ := newFallback(t, FallbackOptions{Instances: 4})
		set := limitsOf(t, ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 10, Window: time.Minute, Burst: 10})
		if d, err := f.Allow(ctx, "seen", 4, set); err != nil || d.Fallback || d.Results()[0].Remaining != 6 {
			t.Fatalf("healthy: got %+v, %v; want a Redis decision with 6 remaining", d, err)
		}
		m.Close()
		// Of the 6 Redis had left, this instance may spend its quarter,
		// rounded up: 2 of its share of 3.
		p, err := f.Peek(ctx, "seen", 1, set)
		if err != nil || !p.Fallback || !p.Allowed || p.Results()[0].Remaining != 2 {
			t.Errorf("Peek of a key Redis had seen: got %+v, %v; want allowed, 2 remaining", p, err)
		}
		if d, err := f.Allow(ctx, "seen", 1, set); err != nil || !d.Fallback || d.Results()[0].Remaining != 1 {
			t.Errorf("the request after the Peek: got %+v, %v; want a local decision leaving 1", d, err)
		}
		if d, err := f.Peek(ctx, "k", 3, set); err != nil || !d.Fallback || !d.Allowed || d.Results()[0].Remaining != 3 {
			t.Errorf("Peek of this instance's share, 3 of 10 over 4 instances: got %+v, %v; want allowed, 3 remaining", d, err)
		}
		if d, err := f.Peek(ctx, "k", 4, set); err != nil || !d.Fallback || d.Allowed || d.RetryAfter <= 0 {
			t.Errorf("Peek of more than this instance's share: got %+v, %v; want a denial", d, err)
		}
	})
}
