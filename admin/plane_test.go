package override

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var namespaces sync.Map

// newStores returns n stores of one namespace, each with its own client
// to addr: n instances.
func newStores(t *testing.T, n int, client func() redis.UniversalClient) []*Store {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	if _, dup := namespaces.LoadOrStore(ns, true); dup {
		t.Fatal("a namespace used twice")
	}
	stores := make([]*Store, n)
	for i := range stores {
		c := client()
		t.Cleanup(func() { c.Close() })
		stores[i] = NewStore(c, "rltest:", ns)
	}
	return stores
}

func onServer(t *testing.T) func() redis.UniversalClient {
	srv := redistest.Shared(t)
	return func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: srv.Addr}) }
}

// TestStoreSharesOverrides: what one instance sets or deletes, another
// reads at its next Sync, whole; before its first read an instance has
// no table, after it an empty one; the hash has a life.
func TestStoreSharesOverrides(t *testing.T) {
	t.Parallel()
	for name, client := range map[string]func(*testing.T) func() redis.UniversalClient{
		"redis-server": onServer,
		"cluster": func(t *testing.T) func() redis.UniversalClient {
			c := redistest.SharedCluster(t)
			return func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()}) }
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newStores(t, 2, client(t))
			a, b := s[0], s[1]
			if b.Table() != nil {
				t.Fatal("a table before the first read")
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if b.Table() == nil || b.Table().Len() != 0 {
				t.Fatalf("after the first read of none: %v, want an empty table", b.Table())
			}
			set := []Override{
				{Policy: "api", Key: "k1", Quota: 100_000, Window: time.Minute},
				{Policy: "api", Key: "org-7/*", Quota: Unlimited},
				{Policy: "login", Quota: Blocked, Shadow: true},
			}
			for _, o := range set {
				if err := a.Set(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if got := a.Table().All(); len(got) != 3 {
				t.Fatalf("the setter's own table: %+v, want the 3 it set", got)
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			got := b.Table().All()
			want := []Override{set[0], set[1], set[2]}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the other instance read %+v, want %+v", got, want)
			}
			before := b.Table()
			if err := b.Sync(ctx); err != nil || b.Table() != before {
				t.Errorf("a Sync with nothing changed replaced the table (%v)", err)
			}
			if err := a.Delete(ctx, "api", "org-7/*"); err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if o, ok := b.Table().Lookup("api", "org-7/x"); ok {
				t.Errorf("after Delete the other instance still applies %+v", o)
			}
			if o, _ := b.Table().Lookup("api", "k1"); o != set[0] {
				t.Errorf("after Delete of another: %+v, want %+v", o, set[0])
			}
		})
	}
}

// TestStoreLife: the hash has a life, which a change sets and a read
// renews once half of it is gone.
func TestStoreLife(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Shared(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s := newStores(t, 1, func() redis.UniversalClient { return c })[0]
	if err := s.Set(ctx, Override{Policy: "api", Key: "k", Quota: 5}); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, s.key).Result()
	if err != nil || ttl <= Life-time.Minute || ttl > Life {
		t.Fatalf("after a change the life left is %v (%v), want about %v", ttl, err, Life)
	}
	if err := c.PExpire(ctx, s.key, Life/2-time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.PTTL(ctx, s.key).Result(); err != nil || ttl <= Life-time.Minute {
		t.Errorf("a read with less than half the life left left %v (%v), want it renewed", ttl, err)
	}
}

// TestStoreIsBounded: past the most a namespace holds, a new override is
// refused, saying so, and a replacement is not; nothing half written.
func TestStoreIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t, 1, onServer(t))[0]
	s.most = 3
	for i := range 3 {
		if err := s.Set(ctx, Override{Policy: "api", Key: fmt.Sprint("k", i), Quota: 1}); err != nil {
			t.Fatal(err)
		}
	}
	err := s.Set(ctx, Override{Policy: "api", Key: "k3", Quota: 1})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "3 overrides are set") {
		t.Errorf("a fourth: got %v, want ErrInvalid naming the bound", err)
	}
	if err := s.Set(ctx, Override{Policy: "api", Key: "k0", Quota: 2}); err != nil {
		t.Errorf("replacing one when full: %v", err)
	}
	if n := s.Table().Len(); n != 3 {
		t.Errorf("the table holds %d, want 3", n)
	}
}

// TestStoreRefusesBeforeRedis: a wrong override is refused with its
// field named, before any call: here to a server that does not answer.
func TestStoreRefusesBeforeRedis(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	s := NewStore(c, "rltest:", "refuse")
	err := s.Set(context.Background(), Override{Policy: "api", Key: "k"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Quota is 0") {
		t.Errorf("got %v, want ErrInvalid naming Quota", err)
	}
}

// TestStoreKeepsTableThroughOutage: while Redis does not answer, Sync
// fails and the table read last stays; once it answers, the newest
// overrides win.
func TestStoreKeepsTableThroughOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Require(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { admin.Close() })
	s := newStores(t, 2, func() redis.UniversalClient { return c })
	a, b := s[0], s[1]
	b.client = admin
	if err := b.Set(ctx, Override{Policy: "api", Key: "k", Quota: 5}); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// CLIENT PAUSE WRITE holds every script until CLIENT UNPAUSE:
	// a's Sync runs out of time.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 60_000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := a.Sync(short)
	cancel()
	if err == nil {
		t.Fatal("a Sync while Redis is paused succeeded")
	}
	if o, ok := a.Table().Lookup("api", "k"); !ok || o.Quota != 5 {
		t.Fatalf("during the outage: %+v, %v; want the override read before", o, ok)
	}
	if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	// The newest change, made once Redis answers again, wins.
	deadline := time.Now().Add(10 * time.Second)
	for b.Set(ctx, Override{Policy: "api", Key: "k", Quota: 7}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not answer again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for a.Sync(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not answer a Sync again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if o, _ := a.Table().Lookup("api", "k"); o.Quota != 7 {
		t.Errorf("after the outage: %+v, want the newest (quota 7)", o)
	}
}

// TestStoreRun: an instance that runs Sync every period applies another's
// change within a few periods, and stops when its context ends.
func TestStoreRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s := newStores(t, 2, onServer(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s[1].Run(ctx, 20*time.Millisecond, func(err error) { t.Errorf("Sync: %v", err) })
	}()
	if err := s[0].Set(ctx, Override{Policy: "api", Key: "k", Quota: 9}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		if o, ok := s[1].Table().Lookup("api", "k"); ok && o.Quota == 9 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the running instance did not apply the change in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("applied by the other instance after %v", time.Since(start))
	cancel()
	<-done
}
