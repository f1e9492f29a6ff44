package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
)

// TestClusterConformance runs the conformance suite on a real 3-master
// Redis Cluster through *redis.ClusterClient: every multi-key decision
// must stay in one slot (no CROSSSLOT), and keys must spread over all
// masters.
func TestClusterConformance(t *testing.T) {
	t.Parallel()
	redistest.RequireFaults(t)
	cluster := redistest.RequireCluster(t, 3)
	newCluster := func(t *testing.T) *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	t.Run("suite", func(t *testing.T) {
		storetest.Run(t, storetest.Harness{New: func(t *testing.T, n int) ([]ratelimit.Store, storetest.Clock) {
			prefix := uniquePrefix()
			stores := make([]ratelimit.Store, n)
			for i := range stores {
				stores[i] = newStore(t, newCluster(t), RedisOptions{Prefix: prefix})
			}
			return stores, realClock{}
		}})
	})
	t.Run("keys spread over every master", func(t *testing.T) {
		s := newStore(t, newCluster(t), RedisOptions{Prefix: "spread:"})
		limits := limitsOf(t,
			ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.FixedWindow),
			ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.SlidingLog),
			ratelimit.Limit{Quota: 5, Window: time.Hour},
			ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.TokenBucket),
		)
		for i := range 300 {
			if _, err := s.Allow(context.Background(), fmt.Sprintf("user:%d", i), 1, limits); err != nil {
				t.Fatalf("key %d: %v", i, err)
			}
		}
		for _, m := range cluster.Masters {
			c := redis.NewClient(&redis.Options{Addr: m.Addr})
			n, err := c.DBSize(context.Background()).Result()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			if n < 4*50 {
				t.Errorf("master %s holds %d keys of 1200; want them spread over the three", m.Addr, n)
			}
			t.Logf("master %s: %d keys", m.Addr, n)
		}
	})
	t.Run("fallback over the cluster", func(t *testing.T) {
		f, err := NewFallback(newStore(t, newCluster(t), RedisOptions{Prefix: "fb:"}), FallbackOptions{Budget: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		d, err := f.Allow(context.Background(), "k", 1, limitsOf(t, ratelimit.PerMinute(1)))
		if err != nil || d.Fallback || !d.Allowed {
			t.Errorf("got %+v, %v; want a cluster decision", d, err)
		}
	})
}
