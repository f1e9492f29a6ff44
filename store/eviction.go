package store

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const evictionCheckTimeout = time.Second

// configGetter is the part of a go-redis client that reads CONFIG.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// checkEviction warns when Redis may evict the store's keys. An
// unreachable Redis is left to decisions to find (see probeClient).
func (s *Redis) checkEviction() {
	ctx, cancel := context.WithTimeout(context.Background(), evictionCheckTimeout)
	defer cancel()
	c, end, err := probeClient(ctx, s.client)
	if err != nil {
		return
	}
	defer end()
	for _, e := range s.evictingServers(ctx, c) {
		s.logger.LogAttrs(ctx, slog.LevelWarn, "ratelimit: Redis may evict rate-limit counters under memory pressure, and limits then start afresh without notice; set maxmemory-policy to noeviction (with noeviction, a full Redis refuses writes: a store.Fallback then decides in process)",
			slog.String("server", e.server), slog.String("maxmemory-policy", e.policy))
	}
}

// evictingServer is a server whose maxmemory-policy lets it delete keys.
type evictingServer struct{ server, policy string }

// evictingServers returns the servers (each master of a cluster), asked
// once through client, whose maxmemory-policy is not noeviction, leaving
// out those that do not answer or forbid CONFIG GET (many managed ones).
func (s *Redis) evictingServers(ctx context.Context, client RedisClient) []evictingServer {
	var found []evictingServer
	var mu sync.Mutex
	check := func(ctx context.Context, c configGetter, where string) {
		cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return
		}
		policy := cfg["maxmemory-policy"]
		if strings.HasPrefix(policy, "allkeys-") || strings.HasPrefix(policy, "volatile-") {
			mu.Lock()
			found = append(found, evictingServer{where, policy})
			mu.Unlock()
		}
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			check(ctx, m, m.Options().Addr)
			return nil
		})
	case *redis.Client:
		check(ctx, c, c.Options().Addr)
	case configGetter:
		check(ctx, c, "")
	}
	return found
}

// evictionError is the misconfiguration of evicting servers, or nil.
func evictionError(servers []evictingServer) error {
	if len(servers) == 0 {
		return nil
	}
	var where []string
	for _, e := range servers {
		w := "maxmemory-policy " + e.policy
		if e.server != "" {
			w = e.server + " has " + w
		}
		where = append(where, w)
	}
	return &misconfiguration{
		problem: "Redis may evict the limiter's counters under memory pressure, and limits would start afresh without notice (every counter has a TTL, so volatile-* policies evict them first)",
		fix:     "set maxmemory-policy to noeviction, or give the limiter a Redis of its own with noeviction",
		err:     errors.New(strings.Join(where, "; ")),
	}
}
