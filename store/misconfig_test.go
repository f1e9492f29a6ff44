package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/fallback"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
)

// aclClient makes an ACL user on srv with rule and returns a client logged
// in as it.
func aclClient(t *testing.T, srv *redistest.Server, user, rule string) *redis.Client {
	t.Helper()
	setACL(t, srv, user, "pw-"+user, rule)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "pw-" + user, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// setACL (re)defines user on srv with password and rule.
func setACL(t *testing.T, srv *redistest.Server, user, password, rule string) {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + password}
	for _, r := range strings.Fields(rule) {
		args = append(args, r)
	}
	if err := newClient(t, srv.Addr).Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", user, err)
	}
}

// TestStoreCommandsAreTheScripts: the commands the ACL rule grants are
// those the scripts call, and PING.
func TestStoreCommandsAreTheScripts(t *testing.T) {
	files, err := filepath.Glob("../lua/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	called := map[string]bool{"ping": true}
	re := regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`)
	for _, f := range files {
		switch filepath.Base(f) {
		case "check.lua":
			continue // it calls what it is given
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			called[strings.ToLower(m[1])] = true
		}
	}
	var want []string
	for c := range called {
		want = append(want, c)
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(storeCommands))
	if !slices.Equal(got, want) {
		t.Errorf("storeCommands = %v, the scripts call %v", got, want)
	}
}

// TestACLRuleConformance runs the conformance suite as an ACL user that
// has exactly ACLRule, on the bare store and through a Fallback. It takes
// two minutes of waiting for windows to pass, so it is one of the long
// tests.
func TestACLRuleConformance(t *testing.T) {
	t.Parallel()
	redistest.RequireFaults(t)
	srv := redistest.Shared(t)
	var users atomic.Int64
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", wrapped), func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
				prefix := uniquePrefix()
				client := aclClient(t, srv, fmt.Sprintf("acl%d", users.Add(1)), ACLRule(prefix))
				stores := make([]ratelimit.Store, n)
				for i := range stores {
					r := newStore(t, client, RedisOptions{Prefix: prefix, Logger: quietLogger})
					if err := r.Check(context.Background()); err != nil {
						t.Fatalf("Check with the rule: %v", err)
					}
					stores[i] = r
					if wrapped {
						f, err := NewFallback(r, FallbackOptions{Budget: time.Second, Logger: quietLogger})
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { f.Close() })
						stores[i] = f
					}
				}
				return stores, realClock{}
			}})
		})
	}
}

// everyAlgorithm is one limit of each algorithm: requests under them run
// every command the decisions call.
var everyAlgorithm = []ratelimit.Limit{
	ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.FixedWindow),
	ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.SlidingLog),
	ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.SlidingWindow),
	ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.TokenBucket),
}

// TestCheckNamesEachMissingCommand removes each command of ACLRule in
// turn: Check names it; the bare store returns an ErrMisconfigured when a
// decision needs it; and under load through a Fallback, no request beyond
// the limit is admitted while an ERROR names the command.
func TestCheckNamesEachMissingCommand(t *testing.T) {
	srv := redistest.Require(t)
	admin := newClient(t, srv.Addr)
	for _, missing := range append([]string{"eval", "evalsha"}, storeCommands...) {
		t.Run(missing, func(t *testing.T) {
			ctx := context.Background()
			prefix := uniquePrefix()
			rule := strings.Replace(ACLRule(prefix)+" ", " +"+missing+" ", " ", 1)
			if rule == ACLRule(prefix)+" " {
				t.Fatalf("%s is not in the rule", missing)
			}
			client := aclClient(t, srv, "no-"+missing, rule)
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			r := newStore(t, client, RedisOptions{Prefix: prefix, Logger: logger})
			limits := limitsOf(t, everyAlgorithm...)

			err := r.Check(ctx)
			var ce *misconfiguration
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), missing) {
				t.Fatalf("Check: got %v, want an ErrMisconfigured naming %s", err, missing)
			}
			t.Logf("Check: %v", err)

			// Decisions use EVALSHA, and EVAL only once Redis has lost
			// the script. Some commands run only on some paths (a denial,
			// old state to tidy): the bare store meets the fault when a
			// decision takes such a path, and says so then.
			if missing == "eval" {
				if err := admin.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var bareErr error
			for range 30 {
				if _, bareErr = r.Allow(ctx, "bare", 1, limits); bareErr != nil {
					break
				}
			}
			if bareErr != nil && !errors.As(bareErr, &ce) {
				t.Fatalf("the bare store: got %v, want an ErrMisconfigured", bareErr)
			}

			f, err := NewFallback(r, FallbackOptions{Budget: time.Second, ProbeInterval: 20 * time.Millisecond, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for range 10 {
						d, err := f.Allow(ctx, "k", 1, limits)
						if err != nil {
							t.Errorf("through the Fallback: %v", err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			// Requests Redis admitted while the Fallback went down count
			// twice: at most the limit, maybe fewer.
			if got := admitted.Load(); got > 10 || got < 5 {
				t.Errorf("admitted %d of 40 under a limit of 10", got)
			}
			named := regexp.MustCompile(`level=ERROR .*problem="the ACL user may not run [a-z, ]*\b` + missing + `\b`)
			waitFor(t, "an ERROR naming "+missing, func() bool { return named.MatchString(logs.String()) })
			if st := f.Health(); st.Decisions == "redis" || st.Misconfigured == 0 {
				t.Errorf("%+v: want down for a misconfiguration", st)
			}
		})
	}
}

// load decides limits for key from 4 goroutines, 5 ms apart, until stop
// is closed, and returns how many were admitted and how many were decided
// on Redis, once stopped; meanwhile progress says how many were decided
// so far, and how many of them on Redis.
func load(t *testing.T, s ratelimit.Store, key string, limits []ratelimit.Limit, stop <-chan struct{}) (wait func() (admitted, onRedis int64), progress func() (decided, onRedis int64)) {
	set := limitsOf(t, limits...) // one set, as a Limiter has
	var admitted, onRedis, decided atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				d, err := s.Allow(context.Background(), key, 1, set)
				if err != nil {
					t.Errorf("a request failed: %v", err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
				if !d.Fallback {
					onRedis.Add(1)
				}
				decided.Add(1)
			}
		})
	}
	wait = func() (int64, int64) {
		wg.Wait()
		return admitted.Load(), onRedis.Load()
	}
	progress = func() (int64, int64) { return decided.Load(), onRedis.Load() }
	return wait, progress
}

// TestFaultPasswordRotated rotates the store's ACL password under load,
// and kills its connections: decisions go to memory and the limit holds,
// an ERROR says the password was rejected, and once the password is fixed
// decisions go back to Redis.
func TestFaultPasswordRotated(t *testing.T) {
	redistest.RequireFaults(t)
	srv := redistest.Require(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	client := aclClient(t, srv, "rotated", ACLRule(prefix))
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	f, err := NewFallback(newStore(t, client, RedisOptions{Prefix: prefix, Logger: logger}),
		FallbackOptions{Budget: faultBudget, ProbeInterval: faultInterval, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Requests over the limit are denied by the deny cache, without
	// Redis: a key under a high limit keeps the store calling Redis.
	stop := make(chan struct{})
	wait, progress := load(t, f, "k", everyAlgorithm, stop)
	waitBusy, progressBusy := load(t, f, "busy", []ratelimit.Limit{ratelimit.Limit{Quota: 1_000_000, Window: time.Hour}}, stop)
	// Both on Redis, the limit of "k" spent, before the password changes.
	waitFor(t, "more requests than the limit decided on Redis", func() bool {
		_, k := progress()
		_, busy := progressBusy()
		return k > 10 && busy > 0
	})

	setACL(t, srv, "rotated", "a-new-password", ACLRule(prefix))
	if err := newClient(t, srv.Addr).Do(ctx, "CLIENT", "KILL", "USER", "rotated").Err(); err != nil {
		t.Fatal(err)
	}
	defer func() { t.Logf("logs:\n%s\n%+v", logs.String(), f.Health()) }()
	waitFor(t, "an ERROR saying the password was rejected", func() bool {
		return regexp.MustCompile(`level=ERROR .*problem="Redis rejected the client's username or password"`).MatchString(logs.String())
	})
	if f.Health().Decisions == "redis" {
		t.Error("healthy with the password rejected")
	}
	setACL(t, srv, "rotated", "pw-rotated", ACLRule(prefix))
	waitFor(t, "decisions back on Redis", func() bool { return f.Health().Decisions == "redis" })
	close(stop)
	admitted, onRedis := wait()
	waitBusy()
	if admitted > 10 || admitted == 0 {
		t.Errorf("admitted %d under a limit of 10", admitted)
	}
	if st := f.Health(); st.Local == 0 || st.Recoveries == 0 || onRedis == 0 {
		t.Errorf("%+v, %d on Redis: want decisions in memory, then a recovery", st, onRedis)
	}
	if strings.Contains(logs.String(), "a-new-password") || strings.Contains(logs.String(), "pw-rotated") {
		t.Errorf("a password was logged:\n%s", logs.String())
	}
}

// TestFaultClusterNodeThroughSingleClient points a single server's client
// at a node of a 3-master cluster: Check says to use a cluster client, the
// bare store says so when a key is elsewhere, and through a Fallback the
// limits hold while an ERROR says so too.
func TestFaultClusterNodeThroughSingleClient(t *testing.T) {
	redistest.RequireFaults(t)
	cluster := redistest.RequireCluster(t, 3)
	client := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0], ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	r := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), Logger: logger})
	ctx := context.Background()
	err := r.Check(ctx)
	var ce *misconfiguration
	if !errors.As(err, &ce) || !strings.Contains(ce.problem, "Redis Cluster node") {
		t.Fatalf("Check: got %v, want an ErrMisconfigured saying this is a cluster node", err)
	}
	t.Logf("Check: %v", err)
	var bareErr error
	limits := limitsOf(t, everyAlgorithm...)
	for i := 0; i < 20 && bareErr == nil; i++ { // some key is on another node
		_, bareErr = r.Allow(ctx, fmt.Sprintf("bare%d", i), 1, limits)
	}
	if !errors.As(bareErr, &ce) || !strings.Contains(ce.problem, "Redis Cluster node") {
		t.Fatalf("the bare store: got %v, want an ErrMisconfigured saying this is a cluster node", bareErr)
	}

	f, err := NewFallback(r, FallbackOptions{Budget: time.Second, ProbeInterval: faultInterval, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 5 {
		stop := make(chan struct{})
		wait, progress := load(t, f, fmt.Sprintf("k%d", i), everyAlgorithm, stop)
		waitFor(t, "more requests than the limit decided", func() bool {
			decided, _ := progress()
			return decided > 10
		})
		close(stop)
		if admitted, _ := wait(); admitted > 10 || admitted == 0 {
			t.Errorf("key %d: admitted %d under a limit of 10", i, admitted)
		}
	}
	waitFor(t, "an ERROR saying to use a cluster client", func() bool {
		return regexp.MustCompile(`level=ERROR .*problem="this server is a Redis Cluster node`).MatchString(logs.String())
	})
	if f.Health().Decisions == "redis" {
		t.Error("healthy on a cluster node through a single server's client")
	}
}

// TestFaultOf classifies errors as Redis and its clients word them: Redis
// 7 and later, inside scripts and out.
func TestFaultOf(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tested := make(map[string]bool) // outageReplies with a case
	defer func() {
		for _, prefix := range outageReplies {
			if !tested[prefix] {
				t.Errorf("outageReplies holds %q, which no case tests", prefix)
			}
		}
	}()
	for _, tt := range []struct {
		err     error
		cluster bool
		ctx     context.Context
		want    fallback.Fault
		problem string // of the misconfiguration, when misconfig
	}{
		{err: nil, want: fallback.None},
		{err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), want: fallback.Outage},
		{err: context.DeadlineExceeded, want: fallback.Outage},
		{err: context.Canceled, ctx: canceled, want: fallback.None},
		{err: io.EOF, want: fallback.Outage},
		{err: net.ErrClosed, want: fallback.Outage},
		{err: redis.ErrClosed, want: fallback.Outage},
		{err: errLate, want: fallback.Outage},
		{err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, want: fallback.Outage},
		{err: errSliceWait, want: fallback.Waited},
		{err: afterWait(context.DeadlineExceeded), want: fallback.Waited},
		{err: afterWait(errLate), want: fallback.Waited},
		{err: afterWait(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), want: fallback.Waited},
		{err: afterWait(errors.New("dial tcp 127.0.0.1:1: connect: connection refused")), want: fallback.Outage},
		{err: context.DeadlineExceeded, ctx: canceled, want: fallback.None},
		{err: scriptError("LOADING Redis is loading the dataset in memory"), want: fallback.Outage},
		{err: scriptError("READONLY You can't write against a read only replica."), want: fallback.Outage},
		{err: scriptError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), want: fallback.Outage},
		{err: scriptError("CLUSTERDOWN The cluster is down"), want: fallback.Outage},
		{err: scriptError("TRYAGAIN Multiple keys request during rehashing of slot"), want: fallback.Outage},
		{err: scriptError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."), want: fallback.Outage},
		{err: scriptError("OOM command not allowed when used memory > 'maxmemory'."), want: fallback.Outage},
		{err: scriptError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), want: fallback.Outage},
		{err: scriptError("NOREPLICAS Not enough good replicas to write."), want: fallback.Outage},
		{err: scriptError("ERR max number of clients reached"), want: fallback.Outage},
		{err: scriptError("MOVED 3999 127.0.0.1:6381"), cluster: true, want: fallback.Outage},
		{err: scriptError("ASK 3999 127.0.0.1:6381"), cluster: true, want: fallback.Outage},
		{err: scriptError("WRONGTYPE Operation against a key holding the wrong kind of value"), want: fallback.None},
		{err: scriptError("ERR user_script:12: ratelimit: the key of a fixed-window limit does not hold its counter"), want: fallback.None},
		{err: scriptError("ERR value is not an integer or out of range"), want: fallback.None},
		{err: scriptError("NOSCRIPT No matching script."), want: fallback.None},
		{err: scriptError("MOVED 3999 127.0.0.1:6381"), want: fallback.Misconfigured, problem: "Redis Cluster node"},
		{err: scriptError("CROSSSLOT Keys in request don't hash to the same slot"), want: fallback.Misconfigured, problem: "Redis Cluster node"},
		{err: scriptError("NOAUTH Authentication required."), want: fallback.Misconfigured, problem: "requires a password"},
		{err: scriptError("ERR Protocol error: unauthenticated multibulk length"), want: fallback.Misconfigured, problem: "requires a password"},
		{err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, want: fallback.Misconfigured, problem: "authority the client does not trust"},
		{err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, want: fallback.Misconfigured, problem: "in plain text"},
		{err: scriptError("WRONGPASS invalid username-password pair or user is disabled."), want: fallback.Misconfigured, problem: "rejected the client's username or password"},
		{err: scriptError("NOPERM this user has no permissions to run the 'evalsha' command"), want: fallback.Misconfigured, problem: "may not run evalsha"},
		{err: scriptError("NOPERM User u has no permissions to run the 'time' command"), want: fallback.Misconfigured, problem: "may not run time"},
		{err: scriptError("NOPERM this user has no permissions to access one of the keys used as arguments"), want: fallback.Misconfigured, problem: "may not use the store's keys"},
		{err: scriptError("ERR The user executing the script can't run this command or subcommand script: 802b49d9, on @user_script:147."), want: fallback.Misconfigured, problem: "a command the store's scripts call"},
		{err: scriptError("ERR ACL failure in script: User u has no permissions to run the 'hget' command script: 802b49d9, on @user_script:147."), want: fallback.Misconfigured, problem: "may not run hget"}, // Valkey 8
		{err: scriptError("ERR unknown command 'EVALSHA', with args beginning with: "), want: fallback.Misconfigured, problem: "renamed or disabled evalsha"},
		{err: scriptError("ERR Unknown Redis command called from script script: 104ae65d, on @user_script:1."), want: fallback.Misconfigured, problem: "a command the store's scripts call"},
	} {
		if tt.want == fallback.Outage && tt.err != nil {
			for _, prefix := range outageReplies {
				if strings.HasPrefix(tt.err.Error(), prefix) {
					tested[prefix] = true
				}
			}
		}
		ctx := tt.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		err := misconfigured(tt.err, "rl:", tt.cluster)
		wrapped := err
		if err != nil {
			wrapped = fmt.Errorf("ratelimit: redis: deciding: %w", err)
		}
		if got := faultOf(ctx, wrapped); got != tt.want {
			t.Errorf("%v (cluster %v): got fault %d, want %d", tt.err, tt.cluster, got, tt.want)
		}
		var ce *misconfiguration
		if errors.As(err, &ce) != (tt.problem != "") || ce != nil && !strings.Contains(ce.problem, tt.problem) {
			t.Errorf("%v: got %v, want an ErrMisconfigured saying %q", tt.err, err, tt.problem)
		}
		if ce == nil {
			continue
		}
		// What a caller sees: the sentinel and Redis's own error, both
		// through the wrapping, and a message that says the problem.
		if !errors.Is(wrapped, ErrMisconfigured) || !errors.Is(wrapped, tt.err) || !strings.Contains(wrapped.Error(), "store: Redis is misconfigured: "+ce.problem+"; ") {
			t.Errorf("%v: got %v; want it to wrap ErrMisconfigured and Redis's error, and say the problem", tt.err, wrapped)
		}
	}
}

// TestCheckNoPassword: a client without the password of a Redis that
// requires one fails Check, which says so, on a real redis-server.
func TestCheckNoPassword(t *testing.T) {
	srv := redistest.Require(t)
	if err := newClient(t, srv.Addr).ConfigSet(t.Context(), "requirepass", "pw").Err(); err != nil {
		t.Fatal(err)
	}
	err := newStore(t, newClient(t, srv.Addr), RedisOptions{Logger: quietLogger}).Check(t.Context())
	var ce *misconfiguration
	if !errors.As(err, &ce) || !strings.Contains(ce.problem, "requires a password") {
		t.Fatalf("Check: %v; want an ErrMisconfigured saying a password is required", err)
	}
}

// TestClusterACL: on a real 3-master cluster, an ACL user with ACLRule
// and +cluster|slots on every node passes Check and decides keys of every
// master; without +cluster|slots, Check names it.
func TestClusterACL(t *testing.T) {
	t.Parallel()
	c := redistest.RequireCluster(t, 3)
	prefix := uniquePrefix()
	for _, m := range c.Masters {
		setACL(t, m, "clustered", "pw-clustered", ACLRule(prefix)+" +cluster|slots")
	}
	newCluster := func() *redis.ClusterClient {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Username: "clustered", Password: "pw-clustered", ContextTimeoutEnabled: true})
		t.Cleanup(func() { client.Close() })
		return client
	}
	s := newStore(t, newCluster(), RedisOptions{Prefix: prefix, Logger: quietLogger})
	if err := s.Check(t.Context()); err != nil {
		t.Fatalf("Check with the rule and +cluster|slots: %v", err)
	}
	limits := limitsOf(t, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.TokenBucket))
	for i := range 30 { // 30 keys: some on every master
		for j, want := range []bool{true, false} {
			d, err := s.Allow(t.Context(), fmt.Sprintf("k%d", i), 1, limits)
			if err != nil || d.Allowed != want {
				t.Fatalf("key %d, request %d: %+v, %v; want allowed %v", i, j, d, err, want)
			}
		}
	}
	for _, m := range c.Masters {
		setACL(t, m, "clustered", "pw-clustered", ACLRule(prefix))
	}
	err := newStore(t, newCluster(), RedisOptions{Prefix: prefix, Logger: quietLogger}).Check(t.Context())
	var ce *misconfiguration
	if !errors.As(err, &ce) || !strings.Contains(ce.problem, "may not run cluster|slots") {
		t.Fatalf("Check without +cluster|slots: %v; want an ErrMisconfigured naming cluster|slots", err)
	}
}
