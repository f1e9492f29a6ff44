package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(edgeEnv) != "" {
		runEdgeInstance()
		return
	}
	if os.Getenv(outageEnv) != "" {
		runOutageInstance()
		return
	}
	// The fault tests make go-redis log every failed dial; those are
	// expected. go-redis's logger is a global that its clients read
	// without a lock, from goroutines that may outlive a test: it is set
	// once, here, and a test that reads what go-redis logs switches
	// where the lines go (see goRedisLog).
	redis.SetLogger(&goRedisLog)
	os.Exit(redistest.Main(m))
}

// goRedisLog is go-redis's logger in these tests: it drops every line
// but while a test has set sink.
var goRedisLog switchedLog

type switchedLog struct {
	sink atomic.Pointer[goRedisLines]
}

func (l *switchedLog) Printf(ctx context.Context, format string, v ...any) {
	if g := l.sink.Load(); g != nil {
		g.Printf(ctx, format, v...)
	}
}

// Every go-redis client kind the docs promise.
var (
	_ RedisClient = (*redis.Client)(nil)
	_ RedisClient = (*redis.ClusterClient)(nil)
	_ RedisClient = (*redis.Ring)(nil)
	_ RedisClient = (*redis.AutoPipeliner)(nil)
)

// epoch is the pinned clock's start: years away from the machine's clock,
// so a script that read the app server's time would fail the suite. It is
// aligned to every slot width the suite uses.
var epoch = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// pinnedClock is a pinned clock; one that drives a miniredis moves its
// TIME and key expiry with it.
type pinnedClock = testkit.Clock

// newMiniredis starts a miniredis whose clock is pinned at epoch.
func newMiniredis(t testing.TB) (*miniredis.Miniredis, *pinnedClock) {
	m := miniredis.RunT(t)
	m.SetTime(epoch)
	m.ClockTTL(true)
	return m, testkit.NewClock(epoch, m.SetTime)
}

func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// patientClient is a client of addr that waits for Redis's answers as
// long as a loaded machine makes them take, for the conformance suite,
// which counts decisions: an error is the client giving up, not the
// store's answer, and a call it gave up on may still be counted by Redis.
// The suite's 200 concurrent requests on one miniredis, which runs their
// scripts one at a time in an interpreter, took up to 2.8s each under
// -race with .ci/busy's load, the test alone, and longer beside the rest
// of the package: past go-redis's default read timeout (3s) and pool
// timeout (4s).
func patientClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute, PoolTimeout: time.Minute})
	t.Cleanup(func() { c.Close() })
	return c
}

func newStore(t testing.TB, client RedisClient, opts RedisOptions) *Redis {
	t.Helper()
	s, err := NewRedis(client, opts)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	return s
}

// noDenyCache turns a Redis store's deny cache off.
const noDenyCache = -1

// limitsOf returns limits as a set, failing t if they are invalid.
var limitsOf = testkit.LimitsOf

// compileLimit returns the integers the stores work with for the valid
// limit l.
func compileLimit(l ratelimit.Limit) *compiled {
	set, err := ratelimit.NewLimits(l)
	if err != nil {
		panic(fmt.Sprintf("compileLimit(%v): %v", l, err))
	}
	return &limitset.Compile(set).Limits[0]
}

// capacity is the most units l holds: a token bucket's burst (its quota
// when unset), else its quota.
func capacity(l ratelimit.Limit) int {
	if l.Algorithm == ratelimit.TokenBucket && l.Burst != 0 {
		return l.Burst
	}
	return l.Quota
}

// TestMiniredisConformance runs the suite on miniredis, which has no
// Redis Functions: the store runs scripts there.
func TestMiniredisConformance(t *testing.T) {
	t.Parallel() // a pinned clock: nothing here depends on the machine's speed
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
		m, clock := newMiniredis(t)
		stores := make([]ratelimit.Store, n)
		for i := range stores {
			// The deny cache keeps the machine's time, not the pinned one.
			s := newStore(t, patientClient(t, m.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
			t.Cleanup(func() {
				if got := s.fn.path.Load(); got == pathFunctions {
					t.Errorf("miniredis: the store called functions")
				}
			})
			stores[i] = s
		}
		return stores, clock
	}})
}

// realClock is a real server's clock: Advance sleeps. With t set, a wait
// of longWait or more skips t there, unless RATELIMIT_FAULTS=1, keeping
// what it checked before: the suite on miniredis checks the same steps on
// a pinned clock, and CI runs the waits.
type realClock struct{ t *testing.T }

// longWait is the shortest wait that realClock leaves to RATELIMIT_FAULTS=1:
// the worked examples' and the retries' waits of a second or so, not the
// random traffic's few milliseconds.
const longWait = 250 * time.Millisecond

func (realClock) Now() time.Time { return time.Now() }
func (c realClock) Advance(d time.Duration) {
	if c.t != nil && d >= longWait {
		redistest.RequireLong(c.t, d)
	}
	time.Sleep(d)
}
func (realClock) Pinned() bool { return false }

// longRuns reports whether RATELIMIT_FAULTS=1 asks for the long tests at
// their full size.
func longRuns() bool { return os.Getenv(redistest.FaultsEnv) == "1" }

// traffic is n, the full size of some random traffic, with
// RATELIMIT_FAULTS=1, and a third of it otherwise, as storetest sizes its
// own.
func traffic(n int) int {
	if longRuns() {
		return n
	}
	return max(1, n/3)
}

var prefixes atomic.Int64

// uniquePrefix gives each store set its own keys on a shared server.
func uniquePrefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// TestRedisServerConformance runs the suite on a real server, with the
// deny cache on, as by default, on each path: Redis Functions and scripts
// (see functions), each pinned, so that neither falls back to the other.
func TestRedisServerConformance(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	for _, path := range []struct {
		name string
		path int32
	}{{"functions", pathFunctions}, {"scripts", pathScripts}} {
		t.Run(path.name, func(t *testing.T) {
			storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
				prefix := uniquePrefix()
				stores := make([]ratelimit.Store, n)
				for i := range stores {
					s := newStore(t, patientClient(t, srv.Addr), RedisOptions{Prefix: prefix})
					s.fn.pin(path.path)
					stores[i] = s
				}
				return stores, realClock{t: t}
			}})
		})
	}
}

// TestClientKinds runs decisions through a Ring and an AutoPipeliner.
func TestClientKinds(t *testing.T) {
	m, _ := newMiniredis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": m.Addr()}})
	t.Cleanup(func() { ring.Close() })
	plain := newClient(t, m.Addr())
	pipeliner, err := plain.AutoPipeline()
	if err != nil {
		t.Fatalf("AutoPipeline: %v", err)
	}
	for name, client := range map[string]RedisClient{"ring": ring, "autopipeliner": pipeliner} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, client, RedisOptions{Prefix: name + ":"})
			l := limitsOf(t, ratelimit.PerMinute(2).Using(ratelimit.TokenBucket))
			for i, want := range []bool{true, true, false} {
				d, err := s.Allow(context.Background(), "k", 1, l)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if d.Allowed != want {
					t.Errorf("request %d: got allowed %v, want %v", i, d.Allowed, want)
				}
			}
		})
	}
}

func TestNewRedisOptions(t *testing.T) {
	m, _ := newMiniredis(t)
	if _, err := NewRedis(nil, RedisOptions{}); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("NewRedis(nil): got %v, want ErrInvalid", err)
	}
	for _, prefix := range []string{"a{", "}b", "{x}"} {
		if _, err := NewRedis(newClient(t, m.Addr()), RedisOptions{Prefix: prefix}); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("Prefix %q: got %v, want ErrInvalid", prefix, err)
		}
	}
	if _, err := NewRedis(newClient(t, m.Addr()), RedisOptions{MaxBatch: -1}); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("MaxBatch -1: got %v, want ErrInvalid", err)
	}
	// The zero options are every default.
	s, err := NewRedis(newClient(t, m.Addr()), RedisOptions{})
	if err != nil {
		t.Fatalf("RedisOptions{}: %v", err)
	}
	if s.prefix != defaultPrefix || s.denied == nil || s.batch == nil || s.batch.maxBatch != defaultMaxBatch {
		t.Errorf("RedisOptions{}: prefix %q, deny cache %v, batch %+v; want the defaults", s.prefix, s.denied != nil, s.batch)
	}
	// A negative deny cache size turns the cache off; a MaxBatch of 1,
	// batching.
	s, err = NewRedis(newClient(t, m.Addr()), RedisOptions{DenyCacheSize: -1, MaxBatch: 1})
	if err != nil {
		t.Fatalf("DenyCacheSize -1, MaxBatch 1: %v", err)
	}
	if s.denied != nil || s.batch != nil {
		t.Errorf("DenyCacheSize -1, MaxBatch 1: deny cache %v, batch %v; want neither", s.denied != nil, s.batch != nil)
	}
}

// TestParseDecisionAllocations reads a script's reply for
// one limit into the decision's inline result, and for two into one
// allocation.
func TestParseDecisionAllocations(t *testing.T) {
	one := limitsOf(t, ratelimit.PerMinute(1000))
	two := limitsOf(t, ratelimit.PerMinute(1000), ratelimit.Limit{Quota: 10000, Window: time.Hour})
	tests := []struct {
		name   string
		line   string
		limits *ratelimit.Limits
		allocs float64
	}{
		{"one limit", "1 999 59999000 0 60000000", one, 0},
		{"two limits", "1 999 59999000 0 60000000 1 9999 3599999000 0 3600000000", two, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d ratelimit.Decision
			var err error
			given := tt.limits.All()
			allocs := testing.AllocsPerRun(100, func() {
				d, err = parseDecision(tt.line, given, false, nil)
			})
			if err != nil || !d.Allowed || len(d.Results()) != len(given) {
				t.Fatalf("got %+v, %v; want allowed with %d results", d, err, len(given))
			}
			if allocs != tt.allocs {
				t.Errorf("got %v allocations per reply, want %v", allocs, tt.allocs)
			}
		})
	}
}

// TestRedisAllowAllocations: a lone decision on a real redis-server
// allocates no more than go-redis's own FCall of a function with a key
// and as many arguments: the store builds the Redis key, where FCall
// boxes the function's name; the rest is go-redis's (the command, its
// arguments, the reply). Sending the call once (see send) must not add
// to it: boxing the verb and the target anew, or an error target made
// on every call, did. A Fallback over the store, on a healthy Redis,
// allocates no more than the store alone: a Call passed by pointer to
// its primary moved to the heap on every decision, and did.
//
// The counts are the program's only without the race detector, under
// which sync.Pool drops one value in four that is put back: the store's
// pooled decisions and the Fallback's pooled contexts are then made anew,
// and a decision read 10 allocations against FCall's 9 on an idle
// machine. So the test runs in the default run, CI's included, not in
// the race run.
func TestRedisAllowAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("allocation counts under the race detector include sync.Pool's random drops; the run without -race checks them")
	}
	srv := redistest.Shared(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, RedisOptions{Prefix: fmt.Sprintf("allocs%d:", time.Now().UnixNano()), DenyCacheSize: noDenyCache})
	limits := limitsOf(t, ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow))
	ctx := context.Background()
	key := "allocs-key"
	if _, err := s.Allow(ctx, key, 1, limits); err != nil {
		t.Fatal(err)
	}
	if s.fn.path.Load() != pathFunctions {
		t.Fatal("the store runs scripts on a redis-server that has functions")
	}
	f, err := NewFallback(s, FallbackOptions{Budget: time.Minute, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	function := decideOne[ratelimit.FixedWindow].function
	redisKey := "allocs-baseline-key"
	args := []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	// AllocsPerRun counts the whole process's allocations: goroutines
	// other tests left behind (a Fallback's prober, renewals) can add to
	// one measure, never take from it, and the more the longer it runs.
	// So each side is measured up to five times, and so is what the rest
	// of the process allocates while nothing runs for as long as a
	// decision takes; a decision may allocate that much more.
	ours, theirs, rest, fallback := math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1)
	for range 5 {
		start := time.Now()
		ours = min(ours, testing.AllocsPerRun(200, func() {
			if _, err := s.Allow(ctx, key, 1, limits); err != nil {
				t.Fatal(err)
			}
		}))
		took := time.Since(start) / 201 // AllocsPerRun runs it once more, first
		fallback = min(fallback, testing.AllocsPerRun(200, func() {
			if d, err := f.Allow(ctx, key, 1, limits); err != nil || d.Fallback {
				t.Fatalf("a Fallback over a healthy Redis: %+v, %v", d, err)
			}
		}))
		theirs = min(theirs, testing.AllocsPerRun(200, func() {
			// Any answer will do, an error included: the call is what counts.
			_ = c.FCall(ctx, function, []string{redisKey}, args...).Err()
		}))
		rest = min(rest, testing.AllocsPerRun(200, func() {
			for t0 := time.Now(); time.Since(t0) < took; {
			}
		}))
		if ours <= theirs+rest && fallback <= ours+rest {
			break
		}
	}
	if ours > theirs+rest {
		t.Errorf("a decision allocates %v times, go-redis's own FCall %v, the rest of the process %v meanwhile: no more is wanted", ours, theirs, rest)
	}
	if fallback > ours+rest {
		t.Errorf("a decision through a Fallback allocates %v times, the store's own %v, the rest of the process %v meanwhile: no more is wanted", fallback, ours, rest)
	}
	t.Logf("a decision allocates %v times (through a Fallback: %v), go-redis's own FCall %v, the rest of the process %v meanwhile", ours, fallback, theirs, rest)
}
