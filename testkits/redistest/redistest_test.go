package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/clusterslot"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestKeySlot(t *testing.T) {
	// Slots as redis-server 7.0 answers CLUSTER KEYSLOT.
	for _, tt := range []struct {
		key  string
		want int
	}{
		{"", 0},
		{"123456789", 12739}, // CRC16 0x31C3, the spec's check value
		{"foo", 12182},
		{"hello", 866},
		{"user1000", 3443},
		{"{user1000}.following", 3443},
		{"{}x", 10595},    // an empty tag hashes the whole key
		{"a{}{b}", 15033}, // only the first { counts
		{"{b}a", 3300},
		{"x{", 3596},
	} {
		if got := clusterslot.Of(tt.key); got != tt.want {
			t.Errorf("clusterslot.Of(%q): got %d, want %d", tt.key, got, tt.want)
		}
	}
}

// TestClusterFailover kills the master of a key in a 3-master, 3-replica
// cluster and checks that its replica takes over with the key's value.
func TestClusterFailover(t *testing.T) {
	RequireFaults(t)
	c := RequireClusterWithReplicas(t, 3, 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer client.Close()

	const key = "redistest:{failover}"
	if err := client.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatalf("SET before the failover: %v", err)
	}
	old, err := c.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	shard := c.shardOf(old)
	if shard < 0 || old != c.Masters[shard] {
		t.Fatalf("MasterFor(%q): got %s, want one of the masters %v", key, old.Addr, c.Addrs()[:len(c.Masters)])
	}
	if got, err := do(ctx, old.Addr, "CLUSTER", "KEYSLOT", key).Int(); err != nil || got != clusterslot.Of(key) {
		t.Fatalf("CLUSTER KEYSLOT %q: got %d (%v), want %d", key, got, err, clusterslot.Of(key))
	}
	// The value must reach the replica before the master dies.
	if n, err := do(ctx, old.Addr, "WAIT", 1, 1000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 on %s: got %d replicas (%v), want 1", old.Addr, n, err)
	}

	old.Kill()
	start := time.Now()
	promoted, err := c.WaitFailover(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster failover of %s to %s took %v", old.Addr, promoted.Addr, time.Since(start).Round(time.Millisecond))
	if want := c.Replicas[shard][0]; promoted != want {
		t.Errorf("WaitFailover: got %s, want the replica %s", promoted.Addr, want.Addr)
	}
	if now, err := c.MasterFor(ctx, key); err != nil || now != promoted {
		t.Errorf("MasterFor(%q) after the failover: got %v (%v), want %s", key, now, err, promoted.Addr)
	}

	// A ClusterClient that knew the old layout keeps dialling the dead
	// master until its state reloads (every 60s, or on MOVED), so ask
	// through a new one, which reads the layout from a live node.
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer fresh.Close()
	if got, err := fresh.Get(ctx, key).Result(); err != nil || got != "before" {
		t.Errorf("GET after the failover: got %q (%v), want %q", got, err, "before")
	}
	if err := fresh.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatalf("SET after the failover: %v", err)
	}
	if got, err := do(ctx, promoted.Addr, "GET", key).Text(); err != nil || got != "after" {
		t.Errorf("GET on the new master %s: got %q (%v), want %q", promoted.Addr, got, err, "after")
	}
}

// TestSentinelFailover kills the master watched by three Sentinels and
// checks that a failover client writes to the replica that replaces it.
func TestSentinelFailover(t *testing.T) {
	RequireFaults(t)
	s := RequireSentinel(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if got, err := s.MasterAddr(ctx); err != nil || got != s.Master.Addr {
		t.Fatalf("MasterAddr: got %q (%v), want %s", got, err, s.Master.Addr)
	}
	client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs()})
	defer client.Close()

	const key = "redistest:failover"
	if err := client.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatalf("SET before the failover: %v", err)
	}
	// The value must reach the replica before the master dies.
	if n, err := client.Do(ctx, "WAIT", 1, 1000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d replicas (%v), want 1", n, err)
	}

	s.Master.Kill()
	start := time.Now()
	promoted, err := s.WaitFailover(ctx, s.Master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Sentinel failover of %s to %s took %v", s.Master.Addr, promoted, time.Since(start).Round(time.Millisecond))
	if promoted != s.Replica.Addr {
		t.Errorf("WaitFailover: got %s, want the replica %s", promoted, s.Replica.Addr)
	}

	if got, err := client.Get(ctx, key).Result(); err != nil || got != "before" {
		t.Errorf("GET after the failover: got %q (%v), want %q", got, err, "before")
	}
	if err := client.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatalf("SET after the failover: %v", err)
	}
	if got, err := do(ctx, promoted, "GET", key).Text(); err != nil || got != "after" {
		t.Errorf("GET on the new master %s: got %q (%v), want %q", promoted, got, err, "after")
	}
}
