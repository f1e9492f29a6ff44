package store

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestEvictionPolicyWarning starts real redis-servers with each kind of
// maxmemory-policy: NewRedis warns, naming the setting, exactly for those
// that evict, and stays silent where CONFIG is not permitted; Check fails
// for the same ones, naming the policy and the fix.
func TestEvictionPolicyWarning(t *testing.T) {
	for _, tt := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--maxmemory-policy", "noeviction"}, false},
		{[]string{"--maxmemory-policy", "allkeys-lru"}, true},
		{[]string{"--maxmemory-policy", "volatile-ttl"}, true},
		{[]string{"--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""}, false},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Require(t, tt.args...)
			var logs syncBuffer
			client := newClient(t, srv.Addr)
			s, err := NewRedis(client, RedisOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Check(t.Context())
			var ce *misconfiguration
			if refused := errors.As(err, &ce) && strings.Contains(err.Error(), "maxmemory-policy "+tt.args[1]) && strings.Contains(ce.fix, "noeviction"); refused != tt.warn || (!tt.warn && err != nil) {
				t.Errorf("Check: %v; want an ErrMisconfigured naming the policy: %v", err, tt.warn)
			}
			got := logs.String()
			warned := strings.Contains(got, "level=WARN") && strings.Contains(got, "maxmemory-policy="+tt.args[1]) && strings.Contains(got, "noeviction")
			if warned != tt.warn || (!tt.warn && got != "") {
				t.Errorf("got log %q; want a warning naming the policy: %v", got, tt.warn)
			}
		})
	}
}

// TestEvictionPolicyWarningCluster: on a cluster, each master is asked,
// by NewRedis and by Check.
func TestEvictionPolicyWarningCluster(t *testing.T) {
	t.Parallel()
	c := redistest.RequireCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { client.Close() })
	one := redis.NewClient(&redis.Options{Addr: c.Masters[1].Addr})
	defer one.Close()
	if err := one.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lfu").Err(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s, err := NewRedis(client, RedisOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	got := logs.String()
	if strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, c.Masters[1].Addr) || !strings.Contains(got, "allkeys-lfu") {
		t.Errorf("got log %q; want one warning, naming %s and allkeys-lfu", got, c.Masters[1].Addr)
	}
	want := c.Masters[1].Addr + " has maxmemory-policy allkeys-lfu"
	if err := s.Check(t.Context()); err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "has maxmemory-policy") != 1 {
		t.Errorf("Check: %v; want an error saying %q, and naming no other server", err, want)
	}
}
