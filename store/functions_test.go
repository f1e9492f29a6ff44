package store

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/lua"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// Tests of the library of Redis Functions (see functions): its names and
// state, and the choice between functions and scripts on real servers.
// The conformance suite runs on both paths in TestRedisServerConformance.

func TestLibraryNames(t *testing.T) {
	if !regexp.MustCompile(`^ratelimit_[0-9a-f]{16}$`).MatchString(library.name) {
		t.Errorf("library name %q, want ratelimit_ and 16 hex digits", library.name)
	}
	if first, _, _ := strings.Cut(library.source, "\n"); first != "#!lua name="+library.name {
		t.Errorf("library's first line %q, want its shebang with its name", first)
	}
	programs := append([]*program{decideAny, peekProgram, chargeProgram, resetProgram, probeProgram}, decideOne[:]...)
	for _, p := range programs {
		if !strings.HasPrefix(p.function, library.name+"_") {
			t.Errorf("function %q does not carry the library's name %q", p.function, library.name)
		}
		if !strings.Contains(library.source, "'"+p.function+"'") {
			t.Errorf("the library does not register %q", p.function)
		}
	}
	if strings.Contains(library.source, "{{library}}") {
		t.Error("the library's source still holds the name's placeholder")
	}
}

// TestLibraryState: a library's top-level locals live from one call to
// the next, so each top-level local of its files is either reset by every
// call or set once, at load.
func TestLibraryState(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^local\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
	known := append(slices.Clone(libraryPerCall), libraryConstants...)
	declared := map[string]bool{}
	for _, f := range libraryFiles {
		if slices.Contains(wrappedFiles, f) {
			continue // wrapped in a function: their locals are the call's
		}
		for _, m := range decl.FindAllStringSubmatch(lua.Source(f), -1) {
			if strings.HasPrefix(m[1], "function") {
				continue
			}
			for _, name := range strings.Split(m[1], ",") {
				name = strings.TrimSpace(name)
				declared[name] = true
				if !slices.Contains(known, name) {
					t.Errorf("%s: top-level local %s is in neither libraryPerCall nor libraryConstants", f, name)
				}
			}
		}
	}
	for _, name := range known {
		if !declared[name] {
			t.Errorf("%s is listed, but no file of the library declares it", name)
		}
	}
}

// TestLibraryLoads: Redis compiles the library, registers its functions
// with their flags, and a second load finds it there: no error.
func TestLibraryLoads(t *testing.T) {
	srv := redistest.Require(t)
	c := newClient(t, srv.Addr)
	ctx := context.Background()
	if err := c.FunctionLoad(ctx, library.source).Err(); err != nil {
		t.Fatalf("FUNCTION LOAD: %v", err)
	}
	if err := c.FunctionLoad(ctx, library.source).Err(); loaded(err) != nil {
		t.Errorf("FUNCTION LOAD again: got %v, want it already there", err)
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: library.name}).Result()
	if err != nil || len(libs) != 1 {
		t.Fatalf("FUNCTION LIST: got %v, %v; want the library", libs, err)
	}
	flags := map[string]string{}
	for _, f := range libs[0].Functions {
		flags[f.Name] = strings.Join(f.Flags, " ")
	}
	want := map[string]string{
		decideAny.function: "", peekProgram.function: "no-writes", chargeProgram.function: "", endProgram.function: "", renewProgram.function: "",
		resetProgram.function: "allow-oom", probeProgram.function: "", overrideProgram.function: "", topProgram.function: "",
	}
	if fmt.Sprint(flags) != fmt.Sprint(want) {
		t.Errorf("functions and flags: got %v, want %v", flags, want)
	}
}

// fcallCounter counts the FCALL and FUNCTION LOAD commands a client
// sends, alone or in pipelines, and the EVALSHA and EVAL.
type fcallCounter struct {
	fcalls, loads, scripts atomic.Int64
}

func (h *fcallCounter) count(cmd redis.Cmder) {
	switch cmd.Name() {
	case "fcall":
		h.fcalls.Add(1)
	case "function":
		if args := cmd.Args(); len(args) > 1 && fmt.Sprint(args[1]) == "load" {
			h.loads.Add(1)
		}
	case "evalsha", "eval":
		h.scripts.Add(1)
	}
}

func (h *fcallCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *fcallCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *fcallCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// countedClient returns a client of addr counting what it sends.
func countedClient(t *testing.T, opts *redis.Options) (*redis.Client, *fcallCounter) {
	t.Helper()
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	h := &fcallCounter{}
	c.AddHook(h)
	return c, h
}

// hammer sends rounds x len(keys) requests from goroutines, each key
// under limits, and checks that none failed and each key admitted exactly
// want. during runs alongside until the requests are done.
func hammer(t *testing.T, s ratelimit.Store, keys []string, limits *ratelimit.Limits, want, goroutines, rounds int, during func(stop <-chan struct{})) {
	t.Helper()
	var o outcomes
	var failures atomic.Int64
	stop := make(chan struct{})
	var side sync.WaitGroup
	if during != nil {
		side.Go(func() { during(stop) })
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				for i := range keys {
					key := keys[(g+r+i)%len(keys)]
					d, err := s.Allow(context.Background(), key, 1, limits)
					if err != nil && failures.Add(1) <= 3 {
						t.Errorf("key %s: %v", key, err)
					}
					o.record(key, d, err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	side.Wait()
	for _, key := range keys {
		if o.passed[key] != want || o.failed[key] != 0 {
			t.Errorf("key %s: %d passed, %d failed; want %d passed, none failed", key, o.passed[key], o.failed[key], want)
		}
	}
}

func manyKeys(name string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", name, i)
	}
	return keys
}

// TestFunctionFlushUnderLoad: FUNCTION FLUSH, again and again, while
// concurrent requests are decided, batched and alone, under a single limit
// and a pair: the store loads the library again (and runs as a script a
// call that finds it flushed again), no request fails, and each key
// admits exactly its quota, so no call that found the library missing was
// counted, and none counted twice.
func TestFunctionFlushUnderLoad(t *testing.T) {
	srv := redistest.Require(t)
	admin := newClient(t, srv.Addr)
	sets := map[string]*ratelimit.Limits{
		"single": limitsOf(t, ratelimit.Limit{Quota: 20, Window: time.Hour}.Using(ratelimit.FixedWindow)),
		"pair":   limitsOf(t, ratelimit.Limit{Quota: 20, Window: time.Hour}.Using(ratelimit.SlidingLog), ratelimit.Limit{Quota: 30, Window: time.Hour}.Using(ratelimit.TokenBucket)),
	}
	for _, maxBatch := range []int{0, 1} {
		for name, limits := range sets {
			t.Run(fmt.Sprintf("%s/maxbatch=%d", name, maxBatch), func(t *testing.T) {
				client, counter := countedClient(t, &redis.Options{Addr: srv.Addr, PoolSize: 16})
				s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), MaxBatch: maxBatch, DenyCacheSize: noDenyCache})
				var flushes atomic.Int64
				hammer(t, s, manyKeys("k", 20), limits, 20, 16, 2, func(stop <-chan struct{}) {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := admin.FunctionFlush(context.Background()).Err(); err != nil {
							t.Errorf("FUNCTION FLUSH: %v", err)
							return
						}
						flushes.Add(1)
						time.Sleep(time.Millisecond)
					}
				})
				t.Logf("%d flushes, %d FCALL, %d FUNCTION LOAD, %d EVALSHA or EVAL", flushes.Load(), counter.fcalls.Load(), counter.loads.Load(), counter.scripts.Load())
				if counter.loads.Load() == 0 {
					t.Error("the library was never loaded")
				}
				if got := s.fn.path.Load(); got != pathFunctions {
					t.Errorf("path %d, want functions: a flush is no refusal", got)
				}
			})
		}
	}
}

// TestFunctionsReloadAfterRestart: a server restarted without persistence
// has lost the library: the next decisions load it again.
func TestFunctionsReloadAfterRestart(t *testing.T) {
	srv := redistest.Require(t)
	client, counter := countedClient(t, &redis.Options{Addr: srv.Addr})
	// No deny cache: it would keep denying what the restart forgot, as
	// RedisOptions.DenyCacheSize says; every request must reach Redis.
	s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache})
	limits := limitsOf(t, ratelimit.Limit{Quota: 2, Window: time.Hour})
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		if i == 2 {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			want = true // the counts went with the restart
		}
		if d, err := s.Allow(ctx, "k", 1, limits); err != nil || d.Allowed != want {
			t.Fatalf("request %d: got %+v, %v; want allowed %v", i, d, err, want)
		}
	}
	if n := counter.loads.Load(); n != 2 {
		t.Errorf("%d loads of the library, want 2: at first and after the restart", n)
	}
}

// TestBatchLoadsLibrary: a batch that finds the library missing (one
// FCALL of all its requests) loads it and runs once more; each request is
// decided once.
func TestBatchLoadsLibrary(t *testing.T) {
	srv := redistest.Require(t)
	client, counter := countedClient(t, &redis.Options{Addr: srv.Addr})
	s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache})
	s.fn.pin(pathFunctions)
	l := []ratelimit.Limit{ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.FixedWindow), ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.SlidingWindow)}
	pair := limitsOf(t, l...)
	ctx := context.Background()
	if _, err := s.Allow(ctx, "first", 1, pair); err != nil {
		t.Fatal(err)
	}
	if err := client.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	keys := manyKeys("batch", 10)
	heldBatch(t, s.batch, len(keys), func(i int) {
		if d, err := s.Allow(ctx, keys[i], 1, pair); err != nil || !d.Allowed {
			t.Errorf("key %s: got %+v, %v; want allowed", keys[i], d, err)
		}
	})
	// first, missing, then again once loaded; the batch likewise.
	if f, l := counter.fcalls.Load(), counter.loads.Load(); f != 4 || l != 2 {
		t.Errorf("%d FCALL and %d FUNCTION LOAD; want 4 and 2", f, l)
	}
	for _, key := range keys {
		if v, err := client.Get(ctx, limitKey(s, key, l[0])).Result(); err != nil || v != "1" {
			t.Errorf("key %s: count %q, %v; want 1", key, v, err)
		}
	}
}

// heldBatch holds b's run slots while request(0) to request(n-1), each in
// a goroutine of its own, join b's queue, and then lets them go together,
// as one batch, and waits for them.
func heldBatch(t *testing.T, b *batcher, n int, request func(i int)) {
	t.Helper()
	b.mu.Lock()
	if b.runs != 0 {
		b.mu.Unlock()
		t.Fatalf("%d runs under way, want none", b.runs)
	}
	b.runs = b.maxRuns
	b.mu.Unlock()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { request(i) })
	}
	waitFor(t, "the requests to wait", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == n
	})
	b.mu.Lock()
	b.runs = 1 // the one next hands on
	b.maxBatch = max(b.maxBatch, n)
	b.mu.Unlock()
	b.next()
	wg.Wait()
}

// recordLogs returns a logger that records every level, and the records'
// levels and messages.
func recordLogs() (*slog.Logger, *syncBuffer) {
	var logs syncBuffer
	return slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), &logs
}

// TestFunctionsACL: an ACL user that may not run FCALL, or FUNCTION LOAD
// when the library is missing, or whose +fcall is taken away while the
// store calls functions, has its decisions run as scripts, exact, with
// one line in the log at INFO and no error; one that may run both calls
// functions.
func TestFunctionsACL(t *testing.T) {
	srv := redistest.Require(t)
	admin := newClient(t, srv.Addr)
	ctx := context.Background()
	limits := limitsOf(t, ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.SlidingLog), ratelimit.Limit{Quota: 12, Window: time.Hour}.Using(ratelimit.FixedWindow))
	for _, tc := range []struct {
		name   string
		extra  string // added to ACLRule
		revoke bool   // take +fcall away halfway
		want   int32
	}{
		{"no fcall", "", false, pathScripts},
		{"no function load", " +fcall", false, pathScripts},
		{"both", " +fcall +function|load", false, pathFunctions},
		{"fcall revoked", " +fcall +function|load", true, pathScripts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := admin.FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			prefix := uniquePrefix()
			user := "u" + strings.TrimSuffix(prefix, ":")
			rule := ACLRule(prefix) + tc.extra
			client := aclClient(t, srv, user, rule)
			logger, logs := recordLogs()
			s := newStore(t, client, RedisOptions{Prefix: prefix, DenyCacheSize: noDenyCache, Logger: logger})
			keys := manyKeys("acl", 10)
			want := 10
			if tc.revoke {
				for _, key := range keys {
					if d, err := s.Allow(ctx, key, 1, limits); err != nil || !d.Allowed {
						t.Fatalf("key %s: got %+v, %v; want allowed", key, d, err)
					}
				}
				if got := s.fn.path.Load(); got != pathFunctions {
					t.Fatalf("path %d before the revocation, want functions", got)
				}
				setACL(t, srv, user, "pw-"+user, ACLRule(prefix)+" +function|load")
				want--
			}
			hammer(t, s, keys, limits, want, 8, 2, nil)
			if got := s.fn.path.Load(); got != tc.want {
				t.Errorf("path %d, want %d", got, tc.want)
			}
			out := logs.String()
			if strings.Contains(out, "level=ERROR") || strings.Contains(out, "level=WARN") {
				t.Errorf("logs hold an error or warning:\n%s", out)
			}
			n := strings.Count(out, "running scripts with EVALSHA")
			switch {
			case tc.want == pathScripts && (n != 1 || !strings.Contains(out, "level=INFO msg=\"ratelimit: the ACL user may not run FCALL")):
				t.Errorf("%d lines about the refusal, want one at INFO:\n%s", n, out)
			case tc.want == pathFunctions && n != 0:
				t.Errorf("%d lines about a refusal, want none:\n%s", n, out)
			}
			if err := s.Reset(ctx, keys[0], limits); err != nil {
				t.Errorf("Reset: %v", err)
			}
			if d, err := s.Peek(ctx, keys[0], 1, limits); err != nil || !d.Allowed {
				t.Errorf("Peek after Reset: got %+v, %v; want allowed", d, err)
			}
		})
	}
}

// TestFunctionsUnknownCommand: a server that has no FCALL, or no
// FUNCTION, as Redis before 7 and miniredis, runs scripts, logged once
// at DEBUG.
func TestFunctionsUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"no fcall", func(t *testing.T) string { return redistest.Require(t, "--rename-command", "FCALL", "").Addr }},
		{"no function", func(t *testing.T) string { return redistest.Require(t, "--rename-command", "FUNCTION", "").Addr }},
		{"miniredis", func(t *testing.T) string { m, _ := newMiniredis(t); return m.Addr() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, logs := recordLogs()
			s := newStore(t, newClient(t, tc.addr(t)), RedisOptions{Prefix: uniquePrefix(), Logger: logger})
			limits := limitsOf(t, ratelimit.Limit{Quota: 3, Window: time.Hour}.Using(ratelimit.TokenBucket))
			for i, want := range []bool{true, true, true, false} {
				if d, err := s.Allow(context.Background(), "k", 1, limits); err != nil || d.Allowed != want {
					t.Fatalf("request %d: got %+v, %v; want allowed %v", i, d, err, want)
				}
			}
			if got := s.fn.path.Load(); got != pathScripts {
				t.Errorf("path %d, want scripts", got)
			}
			out := logs.String()
			if n := strings.Count(out, "running scripts with EVALSHA"); n != 1 || !strings.Contains(out, "level=DEBUG") || strings.Contains(out, "level=INFO") || strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
				t.Errorf("logs, want one line about the refusal, at DEBUG:\n%s", out)
			}
		})
	}
}

// scripterOnly is a RedisClient that runs scripts and nothing else, as a
// custom client may.
type scripterOnly struct{ redis.Scripter }

// TestFunctionsCustomClient: a client without FCALL runs scripts from the
// start.
func TestFunctionsCustomClient(t *testing.T) {
	client, counter := countedClient(t, &redis.Options{Addr: redistest.Shared(t).Addr})
	s := newStore(t, scripterOnly{client}, RedisOptions{Prefix: uniquePrefix()})
	if _, err := s.Allow(context.Background(), "k", 1, limitsOf(t, ratelimit.PerMinute(1))); err != nil {
		t.Fatal(err)
	}
	if s.fn.path.Load() != pathScripts || counter.fcalls.Load() != 0 || counter.scripts.Load() == 0 {
		t.Errorf("path %d, %d FCALL, %d scripts; want scripts only", s.fn.path.Load(), counter.fcalls.Load(), counter.scripts.Load())
	}
}

// TestWarmLoadsLibrary: the Fallback's last step before decisions go back
// to Redis, warm, loads the library that Redis lost meanwhile, as they
// will run.
func TestWarmLoadsLibrary(t *testing.T) {
	srv := redistest.Require(t)
	client := newClient(t, srv.Addr)
	s := newStore(t, client, RedisOptions{Prefix: uniquePrefix()})
	ctx := context.Background()
	if _, err := s.Allow(ctx, "k", 1, limitsOf(t, ratelimit.PerMinute(1))); err != nil {
		t.Fatal(err)
	}
	if err := client.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.warm(ctx); err != nil {
		t.Fatalf("warm: %v", err)
	}
	if libs, err := client.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: library.name}).Result(); err != nil || len(libs) != 1 {
		t.Errorf("after warm: FUNCTION LIST %v, %v; want the library", libs, err)
	}
}

// pin makes f take path, whatever Redis answers.
func (f *functions) pin(path int32) {
	f.path.Store(path)
	f.pinned = true
}

// libraryConstants lists the top-level locals of the library's files that
// are not in libraryPerCall: the files set them once, at load.
var libraryConstants = []string{"algorithms", "clockless", "CHECK", "COMMIT", "SETTLE", "DECIDE", "CHARGE", "PEEK", "slice_margin", "hold_life", "max_holds"}
