package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
)

// WithRedisLogger sets where the store warns about a Redis configured
// against it (see [NewRedis]); the default is slog.Default().
func WithRedisLogger(l *slog.Logger) RedisOption {
	return func(s *Redis) error {
		if l == nil {
			return fmt.Errorf("%w: store.WithRedisLogger: the logger is nil", ratelimit.ErrInvalid)
		}
		s.logger = l
		return nil
	}
}

// evictionCheckTimeout bounds how long NewRedis waits for CONFIG GET.
const evictionCheckTimeout = time.Second

// configGetter is the part of a go-redis client that reads the
// configuration of one server.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// checkEviction warns when Redis may evict the store's keys: with a
// maxmemory-policy other than noeviction, a Redis under memory pressure
// deletes counters and limits silently start afresh. It asks every server
// it can (each master of a cluster) once, and says nothing when CONFIG GET
// is not permitted, as on many managed services, or Redis does not answer.
func (s *Redis) checkEviction() {
	ctx, cancel := context.WithTimeout(context.Background(), evictionCheckTimeout)
	defer cancel()
	check := func(ctx context.Context, c configGetter, where string) {
		cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return
		}
		if policy := cfg["maxmemory-policy"]; evicting(policy) {
			s.logger.LogAttrs(ctx, slog.LevelWarn, "ratelimit: Redis may evict rate-limit counters under memory pressure, and limits then start afresh without notice; set maxmemory-policy to noeviction (with noeviction, a full Redis refuses writes: a store.Fallback then decides in process)",
				slog.String("server", where), slog.String("maxmemory-policy", policy))
		}
	}
	switch c := s.client.(type) {
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
}

// evicting reports whether a maxmemory-policy lets Redis delete keys.
func evicting(policy string) bool {
	return strings.HasPrefix(policy, "allkeys-") || strings.HasPrefix(policy, "volatile-")
}
