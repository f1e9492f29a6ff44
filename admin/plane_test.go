package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(instanceEnv) != "" {
		serveInstance() // a child of a test: an instance of a service
		return
	}
	os.Exit(redistest.Main(m))
}

var namespaces sync.Map

// newPlanes returns n planes of one namespace, each with its own client
// to addr: n instances.
func newPlanes(t *testing.T, n int, client func() redis.UniversalClient) []*Plane {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
	if _, dup := namespaces.LoadOrStore(ns, true); dup {
		t.Fatal("a namespace used twice")
	}
	planes := make([]*Plane, n)
	for i := range planes {
		c := client()
		p, err := New(storeOf(t, c, "rltest:"), ns, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(); c.Close() })
		planes[i] = p
	}
	return planes
}

// storeOf returns a store of c under prefix, its warnings discarded.
func storeOf(t testing.TB, c store.RedisClient, prefix string) *store.Redis {
	t.Helper()
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// overridesKey is the key in Redis of p's overrides, under "rltest:".
func overridesKey(p *Plane) string { return "rltest:overrides:{" + p.namespace + "}" }

func onServer(t *testing.T) func() redis.UniversalClient {
	srv := redistest.Shared(t)
	return func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: srv.Addr}) }
}

func onCluster(t *testing.T) func() redis.UniversalClient {
	c := redistest.SharedCluster(t)
	return func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()}) }
}

// applied waits until p lists want, up to a minute, and returns how long
// that took.
func applied(t *testing.T, p *Plane, want []Override) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got, ok := p.List()
		if ok && slices.Equal(got, want) {
			return time.Since(start)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("after a minute the instance lists %+v (read: %v), want %+v", got, ok, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPlaneSharesOverrides: what one instance sets or deletes, another
// applies at its next read, whole; the setter at once.
func TestPlaneSharesOverrides(t *testing.T) {
	t.Parallel()
	for name, client := range map[string]func(*testing.T) func() redis.UniversalClient{"redis-server": onServer, "cluster": onCluster} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newPlanes(t, 2, client(t))
			a, b := s[0], s[1]
			if got, ok := b.List(); !ok || len(got) != 0 {
				t.Fatalf("after the first read of none: %+v, %v; want none, read", got, ok)
			}
			set := []Override{
				{Policy: "api", StoredKey: "k1", Quota: 100_000, Window: time.Minute},
				{Policy: "api", StoredKey: "org-7/*", Unlimited: true},
				{Policy: "login", Blocked: true},
			}
			for _, o := range set {
				if err := a.Set(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := a.List(); !slices.Equal(got, set) {
				t.Fatalf("the setter lists %+v at once, want %+v", got, set)
			}
			t.Logf("the other instance applied three changes after %v", applied(t, b, set))
			if _, err := a.Delete(ctx, Override{Policy: "api", StoredKey: "org-7/*"}); err != nil {
				t.Fatal(err)
			}
			applied(t, b, []Override{set[0], set[2]})
			if err := b.Set(ctx, Override{Policy: "api", StoredKey: "k1", Quota: 7}); err != nil {
				t.Fatal(err)
			}
			applied(t, a, []Override{{Policy: "api", StoredKey: "k1", Quota: 7}, set[2]})
		})
	}
}

// TestPlaneAfterRedisLostTheOverrides: when Redis loses the hash (a
// restart without persistence, here FLUSHALL's equivalent for one key)
// and as many changes are made again, an instance that read the old
// ones still sees the new: a version never repeats.
func TestPlaneAfterRedisLostTheOverrides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Shared(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s := newPlanes(t, 2, func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: srv.Addr}) })
	a, b := s[0], s[1]
	first := Override{Policy: "api", StoredKey: "k", Quota: 5}
	if err := a.Set(ctx, first); err != nil {
		t.Fatal(err)
	}
	applied(t, b, []Override{first})
	if err := c.Del(ctx, overridesKey(a)).Err(); err != nil {
		t.Fatal(err)
	}
	second := Override{Policy: "api", StoredKey: "other", Quota: 6}
	if err := a.Set(ctx, second); err != nil {
		t.Fatal(err)
	}
	applied(t, b, []Override{second})
}

// TestPlaneLife: the hash has a life, which a change sets and a read
// renews once half of it is gone.
func TestPlaneLife(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Shared(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s := newPlanes(t, 1, func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: srv.Addr}) })[0]
	if err := s.Set(ctx, Override{Policy: "api", StoredKey: "k", Quota: 5}); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, overridesKey(s)).Result()
	if err != nil || ttl <= overridesLife-time.Minute || ttl > overridesLife {
		t.Fatalf("after a change the life left is %v (%v), want about %v", ttl, err, overridesLife)
	}
	if err := c.PExpire(ctx, overridesKey(s), overridesLife/2-time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.PTTL(ctx, overridesKey(s)).Result(); err != nil || ttl <= overridesLife-time.Minute {
		t.Errorf("a read with less than half the life left left %v (%v), want it renewed", ttl, err)
	}
}

// TestPlaneIsBounded: past the most a namespace holds, a new override is
// refused, saying so, and a replacement is not; nothing half written.
func TestPlaneIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPlanes(t, 1, onServer(t))[0]
	s.most = 3
	for i := range 3 {
		if err := s.Set(ctx, Override{Policy: "api", StoredKey: fmt.Sprint("k", i), Quota: 1}); err != nil {
			t.Fatal(err)
		}
	}
	err := s.Set(ctx, Override{Policy: "api", StoredKey: "k3", Quota: 1})
	if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "3 overrides are set") {
		t.Errorf("a fourth: got %v, want errInvalid naming the bound", err)
	}
	if err := s.Set(ctx, Override{Policy: "api", StoredKey: "k0", Quota: 2}); err != nil {
		t.Errorf("replacing one when full: %v", err)
	}
	if got, _ := s.List(); len(got) != 3 {
		t.Errorf("the instance lists %d, want 3", len(got))
	}
}

// TestPlaneKeepsOverridesThroughOutage: while Redis does not answer,
// reads fail and the overrides read last stay; once it answers, the
// newest win.
func TestPlaneKeepsOverridesThroughOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Require(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	other := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { other.Close() })
	s := newPlanes(t, 1, func() redis.UniversalClient { return c })[0]
	b, err := New(storeOf(t, other, "rltest:"), s.namespace, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	five := Override{Policy: "api", StoredKey: "k", Quota: 5}
	if err := b.Set(ctx, five); err != nil {
		t.Fatal(err)
	}
	applied(t, s, []Override{five})
	// CLIENT PAUSE WRITE holds every script until CLIENT UNPAUSE.
	if err := other.Do(ctx, "CLIENT", "PAUSE", 60_000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = s.sync(short)
	cancel()
	if err == nil {
		t.Fatal("a read while Redis is paused succeeded")
	}
	if got, ok := s.List(); !ok || !slices.Equal(got, []Override{five}) {
		t.Fatalf("during the outage: %+v, %v; want the override read before", got, ok)
	}
	if err := other.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	seven := Override{Policy: "api", StoredKey: "k", Quota: 7}
	deadline := time.Now().Add(time.Minute)
	for b.Set(ctx, seven) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not answer again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	applied(t, s, []Override{seven})
}

// TestPlaneStartedInOutage: a Plane whose first read fails has read
// nothing, says so, and applies none; once Redis answers, it reads them.
func TestPlaneStartedInOutage(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	var logs testkit.Buffer
	p, err := New(storeOf(t, c, ""), "outage", Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if got, ok := p.List(); ok || got != nil || p.table.Load() != nil {
		t.Errorf("started without Redis: %+v, %v; want none read", got, ok)
	}
	if !strings.Contains(logs.String(), "none are known yet") {
		t.Errorf("the log says %q, want that none are known yet", logs.String())
	}
}

// TestPlaneRefuses: a wrong override is refused with its field named,
// before any call: here to a server that does not answer.
func TestPlaneRefuses(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	p, err := New(storeOf(t, c, ""), "refuse", Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for _, tt := range []struct {
		o    Override
		want string
	}{
		{Override{Policy: "api", StoredKey: "k"}, "changes nothing"},
		{Override{StoredKey: "k", Quota: 1}, "Policy is empty"},
		{Override{Policy: "api", Quota: -1}, "Quota is -1"},
		{Override{Policy: "api", Unlimited: true, Blocked: true}, "choose one"},
		{Override{Policy: "api", Blocked: true, Quota: 3}, "without a Quota"},
		{Override{Policy: "api", Quota: 3, Window: time.Microsecond}, "whole milliseconds"},
		{Override{Policy: "api", StoredKey: "a*b", Quota: 3}, `"*" before its end`},
	} {
		err := p.Set(context.Background(), tt.o)
		if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Set(%+v): got %v, want errInvalid saying %q", tt.o, err, tt.want)
		}
	}
}

// TestSetShadowKeepsTheRest: SetShadow changes only the whole policy's
// shadow, keeping its quota and window, and makes the override when
// there is none; every instance reads it.
func TestSetShadowKeepsTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, client := range map[string]func(*testing.T) func() redis.UniversalClient{"redis-server": onServer, "cluster": onCluster} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newPlanes(t, 2, client(t))
			a, b := s[0], s[1]
			whole := Override{Policy: "api", Quota: 50, Window: time.Minute}
			if err := a.Set(ctx, whole); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				policy string
				shadow bool
				want   []Override
			}{
				{"api", true, []Override{{Policy: "api", Quota: 50, Window: time.Minute, Shadow: true}}},
				{"api", false, []Override{{Policy: "api", Quota: 50, Window: time.Minute, Enforced: true}}},
				{"login", true, []Override{{Policy: "api", Quota: 50, Window: time.Minute, Enforced: true}, {Policy: "login", Shadow: true}}},
			}
			for _, st := range steps {
				if err := a.SetShadow(ctx, st.policy, st.shadow); err != nil {
					t.Fatal(err)
				}
				applied(t, b, st.want)
			}
		})
	}
}

// TestChangesAreWhole: while one instance flips an override between two
// of its quota and window together, readers of another instance's
// overrides, on every table they read, see one of the two, never the
// quota of one with the window of the other; and after each read the
// other instance applies the latest, whole.
func TestChangesAreWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPlanes(t, 2, onServer(t))
	writer, reader := s[0], s[1]
	a := Override{Policy: "api", StoredKey: "k", Quota: 5, Window: time.Minute}
	b := Override{Policy: "api", StoredKey: "k", Quota: 50, Window: time.Hour}
	if err := writer.Set(ctx, a); err != nil {
		t.Fatal(err)
	}
	applied(t, reader, []Override{a})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				o, ok := reader.table.Load().Lookup("api", "k")
				reads.Add(1)
				if !ok || (o.Quota != 5 || o.Window != time.Minute) && (o.Quota != 50 || o.Window != time.Hour) {
					t.Errorf("a half-applied change: %+v (found %v)", o, ok)
					return
				}
			}
		})
	}
	for i := range 40 {
		o := a
		if i%2 == 0 {
			o = b
		}
		if err := writer.Set(ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := reader.sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := reader.table.Load().Lookup("api", "k"); got.Quota != o.Quota || got.Window != o.Window {
			t.Errorf("change %d: the other instance applies %+v, want %+v", i, got, o)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads beside 40 changes", reads.Load())
}

// TestOverridesSurviveRestarts: on a Redis that persists (an append-only
// file written at every write), the overrides outlive a restart of Redis
// (SIGKILL, then the same directory) and of the instances: a Plane made
// after both reads them, and the one that ran through the restart keeps
// applying them and reads a change made after it.
func TestOverridesSurviveRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Require(t, "--appendonly", "yes", "--appendfsync", "always")
	client := func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: srv.Addr}) }
	s := newPlanes(t, 1, client)
	running := s[0]
	o := Override{Policy: "api", StoredKey: "k", Quota: 42, Window: time.Minute}
	if err := running.Set(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	ns := running.namespace
	c := client()
	t.Cleanup(func() { c.Close() })
	restarted, err := New(storeOf(t, c, "rltest:"), ns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restarted.Close() })
	if got, read := restarted.List(); !read || !slices.Equal(got, []Override{o}) {
		t.Errorf("an instance started after Redis restarted lists %+v (read %v), want %+v", got, read, o)
	}
	if got, _ := running.List(); !slices.Equal(got, []Override{o}) {
		t.Errorf("the instance that ran through the restart lists %+v, want %+v", got, o)
	}
	changed := Override{Policy: "api", StoredKey: "k", Quota: 43}
	deadline := time.Now().Add(time.Minute)
	for restarted.Set(ctx, changed) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no change could be made after the restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
	applied(t, running, []Override{changed})
}
