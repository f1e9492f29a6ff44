package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestClusterFunctions: Redis Functions on a real 3-master cluster. The
// suite's conformance run through functions is TestClusterBatchConformance.
func TestClusterFunctions(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	ctx := context.Background()
	flushAll := func(t *testing.T) {
		t.Helper()
		for _, m := range cluster.Masters {
			if err := newClient(t, m.Addr).FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	hasLibrary := func(t *testing.T) {
		t.Helper()
		for _, m := range cluster.Masters {
			libs, err := newClient(t, m.Addr).FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: library.name}).Result()
			if err != nil || len(libs) != 1 {
				t.Errorf("master %s: FUNCTION LIST %v, %v; want the library", m.Addr, libs, err)
			}
		}
	}
	l := []ratelimit.Limit{ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.FixedWindow), ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.TokenBucket)}
	pair := limitsOf(t, l...)

	// A master's batch, one pipeline of FCALL, finds the library flushed:
	// the store loads it on every master and sends the calls again. Each
	// request is decided once.
	t.Run("batch loads the library", func(t *testing.T) {
		client, counter := clusterClient(t, cluster)
		s := clusterStore(t, client)
		s.fn.pin(pathFunctions)
		master := cluster.Masters[0]
		first := keysOn(t, client, master.Addr, "first", 1)[0]
		if _, err := s.Allow(ctx, first, 1, pair); err != nil { // the client knows the slots
			t.Fatal(err)
		}
		flushAll(t)
		keys := keysOn(t, client, master.Addr, "missing", 10)
		before := counter.pipedFCalls.Load()
		heldBatch(t, s.masters.batcher(master.Addr), len(keys), func(i int) {
			if d, err := s.Allow(ctx, keys[i], 1, pair); err != nil || !d.Allowed {
				t.Errorf("key %s: got %+v, %v; want allowed", keys[i], d, err)
			}
		})
		if n := counter.pipedFCalls.Load() - before; n != 2*int64(len(keys)) {
			t.Errorf("%d FCALL pipelined, want %d: the batch, then again once loaded", n, 2*len(keys))
		}
		for _, key := range keys {
			if v, err := client.Get(ctx, limitKey(s, key, l[0])).Result(); err != nil || v != "1" {
				t.Errorf("key %s: count %q, %v; want 1", key, v, err)
			}
		}
		hasLibrary(t)
	})

	// FUNCTION FLUSH on every master, again and again, under concurrent
	// requests for keys of every master: none fails, counts stay exact.
	t.Run("flush under load", func(t *testing.T) {
		client, _ := clusterClient(t, cluster)
		s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache})
		var keys []string
		for i, m := range cluster.Masters {
			keys = append(keys, keysOn(t, client, m.Addr, fmt.Sprintf("m%d", i), 8)...)
		}
		var flushes atomic.Int64
		hammer(t, s, keys, pair, 5, 24, 1, func(stop <-chan struct{}) {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, m := range cluster.Masters {
					if err := newClient(t, m.Addr).FunctionFlush(ctx).Err(); err != nil {
						t.Errorf("FUNCTION FLUSH: %v", err)
						return
					}
				}
				flushes.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		})
		t.Logf("%d flushes of every master", flushes.Load())
		if got := s.fn.path.Load(); got != pathFunctions {
			t.Errorf("path %d, want functions", got)
		}
	})

	// warm, the Fallback's step before decisions go back to Redis, loads
	// the library on every master.
	t.Run("warm", func(t *testing.T) {
		client, _ := clusterClient(t, cluster)
		s := newStore(t, client, RedisOptions{Prefix: uniquePrefix()})
		flushAll(t)
		if err := s.warm(ctx); err != nil {
			t.Fatalf("warm: %v", err)
		}
		hasLibrary(t)
	})

	// An ACL user that may not run FCALL, or FUNCTION LOAD where the
	// library is missing: a batch's pipeline is refused, and its requests
	// run as scripts, once each.
	for _, tc := range []struct{ name, extra string }{{"no fcall", ""}, {"no function load", " +fcall"}} {
		t.Run("acl "+tc.name, func(t *testing.T) {
			flushAll(t)
			prefix := uniquePrefix()
			user := "u" + prefix[:len(prefix)-1]
			for _, m := range cluster.Masters {
				setACL(t, m, user, "pw", ACLRule(prefix)+" +cluster|slots +cluster|shards"+tc.extra)
			}
			client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), Username: user, Password: "pw"})
			t.Cleanup(func() { client.Close() })
			logger, logs := recordLogs()
			s := newStore(t, client, RedisOptions{Prefix: prefix, DenyCacheSize: noDenyCache, Logger: logger})
			s.masters.maxRuns = 1
			master := cluster.Masters[1]
			keys := keysOn(t, client, master.Addr, "acl", 10)
			heldBatch(t, s.masters.batcher(master.Addr), len(keys), func(i int) {
				if d, err := s.Allow(ctx, keys[i], 1, pair); err != nil || !d.Allowed {
					t.Errorf("key %s: got %+v, %v; want allowed", keys[i], d, err)
				}
			})
			if got := s.fn.path.Load(); got != pathScripts {
				t.Errorf("path %d, want scripts", got)
			}
			for _, key := range keys {
				if v, err := newClient(t, master.Addr).Get(ctx, limitKey(s, key, l[0])).Result(); err != nil || v != "1" {
					t.Errorf("key %s: count %q, %v; want 1", key, v, err)
				}
			}
			t.Log(logs.String())
		})
	}
}
