package store

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// Fault tests: a real redis-server that the test kills, restarts and
// pauses while concurrent requests go through the HTTP middleware. They
// run only with RATELIMIT_FAULTS=1 (see redistest.RequireFaults).

const (
	faultBudget   = 50 * time.Millisecond
	faultInterval = 100 * time.Millisecond
	// steadyBudget is the budget of the tests that count transitions:
	// under the race detector on a loaded 2-core machine, a decision
	// now and then stalls past 50 ms with Redis healthy, and rightly
	// sends decisions to memory, which those tests would count as a
	// flap. Such stalls do not reach 250 ms.
	steadyBudget = 250 * time.Millisecond
	// faultMargin is what the tests allow above the budget for the rest of
	// a request's path (HTTP on loopback, the race detector, a loaded
	// 2-core machine).
	faultMargin = 250 * time.Millisecond
)

// faultRig is a redis-server, a store over it and an HTTP server limited
// through it.
type faultRig struct {
	srv      *redistest.Server
	client   *redis.Client
	fallback *Fallback // nil without
	health   transitions
	limiter  *ratelimit.Limiter
	local    atomic.Int64 // requests an in-process fallback decided, as the observer saw
	http     *httptest.Server
}

// transitions records a Fallback's changes of health, with their times.
type transitions struct {
	mu   sync.Mutex
	ups  []bool
	at   []time.Time
	errs []error // why each went down

	probes []probeRun // every probe of Redis, in order
}

// probeRun is one probe of a down Redis: when it started, and whether it
// found Redis able to decide.
type probeRun struct {
	start time.Time
	ok    bool
}

func (h *transitions) probed(start time.Time, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probes = append(h.probes, probeRun{start, ok})
}

// checkBack fails t unless the first or second probe that started after
// the fault ended brought decisions back to Redis: the probe interval is
// the mechanism's promise; how long a probe then takes, and how late a
// busy machine runs it, are not. (A probe that started before the fault
// ended and found Redis back counts as well.)
func (h *transitions) checkBack(t *testing.T, what string, ended time.Time) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	after := 0
	for _, p := range h.probes {
		if !p.start.Before(ended) {
			after++
		}
		if p.ok {
			t.Logf("%s: back on Redis by probe %d after the fault ended, which started %v after it (probe interval %v)",
				what, after, p.start.Sub(ended).Round(time.Millisecond), faultInterval)
			if after > 2 {
				t.Errorf("%s: back on Redis by probe %d after the fault ended, want by the first or second", what, after)
			}
			return
		}
	}
	t.Errorf("%s: no probe found Redis back; %d probes started after the fault ended", what, after)
}

func (h *transitions) hook(up bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ups = append(h.ups, up)
	h.at = append(h.at, time.Now())
	h.errs = append(h.errs, err)
}

// String lists the changes, with their times after the first and why
// each down came, for a failing test to show.
func (h *transitions) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for i, up := range h.ups {
		if up {
			fmt.Fprintf(&b, "; up at +%v", h.at[i].Sub(h.at[0]).Round(time.Millisecond))
		} else {
			fmt.Fprintf(&b, "; down at +%v: %v", h.at[i].Sub(h.at[0]).Round(time.Millisecond), h.errs[i])
		}
	}
	return strings.TrimPrefix(b.String(), "; ")
}

// get returns the changes so far: up or down, and when.
func (h *transitions) get() ([]bool, []time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bool(nil), h.ups...), append([]time.Time(nil), h.at...)
}

func newFaultRig(t *testing.T, withFallback bool, opts ...ratelimit.Option) *faultRig {
	t.Helper()
	return newFaultRigWith(t, redis.Options{}, withFallback, faultBudget, opts...)
}

// newFaultRigWith is newFaultRig with a go-redis client made from
// clientOpts (its Addr and ContextTimeoutEnabled are set here).
func newFaultRigWith(t *testing.T, clientOpts redis.Options, withFallback bool, budget time.Duration, opts ...ratelimit.Option) *faultRig {
	t.Helper()
	r := &faultRig{srv: redistest.Require(t)}
	clientOpts.Addr, clientOpts.ContextTimeoutEnabled = r.srv.Addr, true
	r.client = redis.NewClient(&clientOpts)
	t.Cleanup(func() { r.client.Close() })
	var s ratelimit.Store = newStore(t, r.client, RedisOptions{})
	if withFallback {
		f, err := NewFallback(s.(*Redis), FallbackOptions{Budget: budget, ProbeInterval: faultInterval, Logger: quietLogger, HealthHook: r.health.hook})
		if err != nil {
			t.Fatal(err)
		}
		f.impl.OnProbe(r.health.probed)
		t.Cleanup(func() { f.Close() })
		r.fallback, s = f, f
	}
	key, err := ratelimit.HeaderKey("X-Client", []byte("the fault tests' secret"))
	if err != nil {
		t.Fatal(err)
	}
	countLocal := func(_ ratelimit.Request, e ratelimit.Event) {
		if e.Decision.Fallback {
			r.local.Add(1)
		}
	}
	opts = append([]ratelimit.Option{ratelimit.WithLogger(quietLogger), ratelimit.WithKey(key), ratelimit.WithObserver(countLocal)}, opts...)
	l, err := ratelimit.New(s, "faults", opts...)
	if err != nil {
		t.Fatal(err)
	}
	r.limiter = l
	r.http = httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })))
	t.Cleanup(r.http.Close)
	return r
}

type outcome struct {
	start   time.Time
	latency time.Duration
	status  int // 0: the request failed
	remain  int
}

// load sends requests from workers goroutines, each its own client key,
// until ctx ends.
func (r *faultRig) load(ctx context.Context, workers int) []outcome {
	var mu sync.Mutex
	var out []outcome
	var wg sync.WaitGroup
	// A connection per worker, kept: with http.DefaultTransport's two idle
	// connections per host, the other workers would open one per request,
	// and tens of thousands of sockets waiting out TIME_WAIT make every
	// dial slow, Redis's included.
	transport := &http.Transport{MaxIdleConnsPerHost: workers}
	defer transport.CloseIdleConnections()
	for w := range workers {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second, Transport: transport}
			for ctx.Err() == nil {
				o := r.get(client, fmt.Sprintf("worker-%d", w))
				mu.Lock()
				out = append(out, o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b outcome) int { return a.start.Compare(b.start) })
	return out
}

func (r *faultRig) get(client *http.Client, key string) outcome {
	req, _ := http.NewRequest("GET", r.http.URL, nil)
	req.Header.Set("X-Client", key)
	o := outcome{start: time.Now(), remain: -1}
	resp, err := client.Do(req)
	o.latency = time.Since(o.start)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		o.status = resp.StatusCode
		if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
			o.remain, _ = strconv.Atoi(v)
		}
	}
	return o
}

// percentile returns the p-th percentile latency of outcomes.
func percentile(out []outcome, p float64) time.Duration {
	l := make([]time.Duration, len(out))
	for i, o := range out {
		l[i] = o.latency
	}
	slices.Sort(l)
	return l[min(len(l)-1, int(float64(len(l))*p))]
}

// during runs load for total, calling fault at offset, and returns once
// both are over.
func (r *faultRig) during(t *testing.T, total, offset time.Duration, fault func()) []outcome {
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(offset)
		fault()
	}()
	out := r.load(ctx, 8)
	<-done
	return out
}

func lots() ratelimit.Option { return ratelimit.WithLimits(ratelimit.PerMinute(1_000_000)) }

// (a) Redis killed, with the fallback: no request fails and p99 stays
// within the budget plus the margin.
func TestFaultKilledWithFallback(t *testing.T) {
	redistest.RequireFaults(t)
	r := newFaultRig(t, true, lots())
	var killedAt time.Time
	out := r.during(t, 3*time.Second, time.Second, func() { killedAt = time.Now(); r.srv.Kill() })
	after := 0
	for _, o := range out {
		if o.status != 200 {
			t.Fatalf("a request at +%v got status %d", o.start.Sub(killedAt), o.status)
		}
		if o.start.After(killedAt) {
			after++
		}
	}
	p50, p99, worst := percentile(out, .5), percentile(out, .99), percentile(out, 1)
	t.Logf("Redis killed: %d requests (%d after the kill), none failed; latency p50 %v, p99 %v, max %v; %d decided in process",
		len(out), after, p50, p99, worst, r.local.Load())
	if p99 > faultBudget+faultMargin {
		t.Errorf("p99 latency %v exceeds the budget %v + margin %v", p99, faultBudget, faultMargin)
	}
	if after == 0 || r.local.Load() == 0 {
		t.Error("no request was decided in process after the kill")
	}
}

// (a) Redis killed, fail closed without a fallback: every request after
// the kill gets 503. Without a fallback there is no time budget: how long
// each takes is the go-redis client's doing, logged here for its default
// options and for options that fail fast.
func TestFaultKilledFailClosed(t *testing.T) {
	redistest.RequireFaults(t)
	for _, tt := range []struct {
		name string
		opts redis.Options
	}{
		{"go-redis defaults", redis.Options{}},
		{"DialerRetries 1, MaxRetries -1", redis.Options{DialerRetries: 1, MaxRetries: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newFaultRigWith(t, tt.opts, false, faultBudget, lots(), ratelimit.WithErrorHandler(ratelimit.FailClosed))
			var killedAt time.Time
			out := r.during(t, 3*time.Second, time.Second, func() { killedAt = time.Now(); r.srv.Kill() })
			counts := map[int]int{}
			var after []outcome
			for _, o := range out {
				if o.start.After(killedAt.Add(50 * time.Millisecond)) {
					if o.status != 503 {
						t.Fatalf("a request at +%v after the kill got %d, want 503", o.start.Sub(killedAt), o.status)
					}
					after = append(after, o)
				}
				counts[o.status]++
			}
			if len(after) == 0 {
				t.Fatal("no request started after the kill")
			}
			t.Logf("Redis killed, fail closed, %s: statuses %v; after the kill, latency p50 %v, max %v",
				tt.name, counts, percentile(after, .5), percentile(after, 1))
		})
	}
}

// (b) Redis restarted: decisions return to Redis within two probe
// intervals of it answering again.
func TestFaultRestarted(t *testing.T) {
	r := newFaultRig(t, true, lots())
	ctx := context.Background()
	r.srv.Kill()
	waitFor(t, "the fallback to notice", func() bool {
		r.get(http.DefaultClient, "poke")
		return r.fallback.Health().Decisions != "redis"
	})
	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	probe := limitsOf(t, ratelimit.PerMinute(1_000_000))
	waitFor(t, "decisions to return to Redis", func() bool {
		d, err := r.fallback.Allow(ctx, "probe", 1, probe)
		return err == nil && !d.Fallback
	})
	t.Logf("Redis restarted: decisions back on Redis %v after it answered", time.Since(back))
	r.health.checkBack(t, "Redis restarted", back)
}

// (c) Redis paused with SIGSTOP, a hung server: every request still
// finishes within the budget plus the margin, and none fails.
func TestFaultPaused(t *testing.T) {
	redistest.RequireFaults(t)
	r := newFaultRig(t, true, lots())
	var pausedAt time.Time
	out := r.during(t, 3500*time.Millisecond, time.Second, func() {
		pausedAt = time.Now()
		r.srv.Pause()
		time.Sleep(1500 * time.Millisecond)
		r.srv.Resume()
	})
	worst := time.Duration(0)
	for _, o := range out {
		if o.status != 200 {
			t.Fatalf("a request at +%v got status %d", o.start.Sub(pausedAt), o.status)
		}
		worst = max(worst, o.latency)
	}
	t.Logf("Redis paused 1.5s: %d requests, none failed; latency p50 %v, p99 %v, max %v", len(out), percentile(out, .5), percentile(out, .99), worst)
	if worst > faultBudget+faultMargin {
		t.Errorf("a request took %v, more than the budget %v + margin %v", worst, faultBudget, faultMargin)
	}
	waitFor(t, "Redis to be used again after SIGCONT", func() bool { return r.fallback.Health().Decisions == "redis" })
}

// (d) Redis back with no data: limits hold again, and remaining is never
// negative.
func TestFaultBackEmpty(t *testing.T) {
	// It counts what passes once Redis is back: a decision that stalls
	// past 50ms on a loaded machine would go in process, as it should,
	// and spoil the count.
	r := newFaultRigWith(t, redis.Options{}, true, steadyBudget, ratelimit.WithLimits(ratelimit.PerMinute(20).Using(ratelimit.FixedWindow)))
	for range 15 {
		r.get(http.DefaultClient, "before")
	}
	r.srv.Kill()
	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Redis to be used", func() bool {
		r.get(http.DefaultClient, "poke")
		return r.fallback.Health().Decisions == "redis"
	})
	for _, key := range []string{"before", "after"} {
		passed := 0
		for range 30 {
			o := r.get(http.DefaultClient, key)
			if o.status == 200 {
				passed++
			}
			if o.remain < 0 || o.remain > 20 {
				t.Fatalf("key %s: X-RateLimit-Remaining %d, want 0..20", key, o.remain)
			}
		}
		if passed != 20 {
			t.Errorf("key %s after Redis came back empty: %d of 30 passed, want 20", key, passed)
		}
	}
}

// Restarts and script-cache flushes are transparent without a fallback:
// NOSCRIPT reloads the script, and no request fails.
func TestFaultScriptCacheLost(t *testing.T) {
	redistest.RequireFaults(t)
	r := newFaultRig(t, false, lots(), ratelimit.WithErrorHandler(ratelimit.FailClosed))
	if o := r.get(http.DefaultClient, "k"); o.status != 200 {
		t.Fatalf("before: got %d", o.status)
	}
	r.srv.Kill()
	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if o := r.get(http.DefaultClient, "k"); o.status != 200 {
			t.Fatalf("request %d after the restart: got %d, want 200", i, o.status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			r.client.ScriptFlush(context.Background())
			time.Sleep(5 * time.Millisecond)
		}
	}()
	out := r.load(ctx, 8)
	for _, o := range out {
		if o.status != 200 {
			t.Fatalf("under SCRIPT FLUSH every 5ms, a request got %d", o.status)
		}
	}
	t.Logf("restart and %d requests under repeated SCRIPT FLUSH: none failed", len(out))
}
