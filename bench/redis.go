package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/redistest"
)

// startRedis starts a throwaway redis-server from PATH, with the
// library's test starter: a free loopback port, no persistence, a
// temporary directory. Close stops it and removes the directory.
func startRedis() (*redistest.Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (%v); install it or pass -redis redis://host:port", err)
	}
	return redistest.Start()
}

// redisTarget is the Redis every Redis-backed contender talks to.
type redisTarget struct {
	opts *redis.Options // parsed from -redis, or pointing at our server
}

// poolSize is the go-redis pool size of every client this program
// creates: more than the largest default caller count, so that no
// contender waits for a connection.
const poolSize = 128

// newClient returns a fresh go-redis client, created the same way for
// every contender: redis.NewClient with the target's options and
// PoolSize 128.
func (t *redisTarget) newClient() *redis.Client {
	o := *t.opts
	o.PoolSize = poolSize
	return redis.NewClient(&o)
}

// newDeadlineClient is newClient honoring context deadlines, as
// store.NewFallback requires.
func (t *redisTarget) newDeadlineClient() *redis.Client {
	o := *t.opts
	o.PoolSize = poolSize
	o.ContextTimeoutEnabled = true
	return redis.NewClient(&o)
}

// flush empties every database of the target, so that no cell sees
// another's keys.
func (t *redisTarget) flush(ctx context.Context) error {
	c := redis.NewClient(t.opts)
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

// version returns the server's redis_version from INFO server.
func (t *redisTarget) version(ctx context.Context) (string, error) {
	c := redis.NewClient(t.opts)
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "unknown", nil
}
