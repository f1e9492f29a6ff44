package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/override"
)

// Overrides returns the door through which the packages admin and
// outbound keep namespace's overrides and top keys beside the store's
// counters (see docs/overrides.md#in-redis; [ACLRule] covers them). Give
// the store to admin.New and outbound.New; an application has no other
// use for it.
func (s *Redis) Overrides(namespace string) override.Keeper {
	return &keeper{s: s, overrides: s.prefix + "overrides:{" + namespace + "}", top: s.prefix + "top:{" + namespace + "}"}
}

// Overrides is the Redis store's (see [Redis.Overrides]): what is kept
// beside the counters is kept in Redis, whoever decides.
func (f *Fallback) Overrides(namespace string) override.Keeper { return f.redis.Overrides(namespace) }

type keeper struct {
	s              *Redis
	overrides, top string
}

// run runs p on key with args, an error of Redis's setup told as such.
func (k *keeper) run(ctx context.Context, p *program, key string, args ...any) ([]string, error) {
	reply, err := k.s.fn.run(ctx, k.s.client, programRun{program: p, keys: []string{key}, args: args}).StringSlice()
	if err != nil {
		return nil, misconfigured(err, k.s.prefix, k.s.cluster)
	}
	return reply, nil
}

func (k *keeper) Read(ctx context.Context, known string, life time.Duration) (string, []string, error) {
	reply, err := k.run(ctx, overrideProgram, k.overrides, "read", known, life.Milliseconds())
	if err != nil {
		return "", nil, err
	}
	if len(reply) == 0 || len(reply)%2 != 1 {
		return "", nil, fmt.Errorf("ratelimit: redis: the overrides' reply has %d items, not the version and pairs", len(reply))
	}
	return reply[0], reply[1:], nil
}

func (k *keeper) Change(ctx context.Context, op, field, value string, life time.Duration, most int) error {
	args := []any{op, field, value, life.Milliseconds(), most}
	if op == "del" {
		args = []any{op, field, life.Milliseconds()}
	}
	_, err := k.s.fn.run(ctx, k.s.client, programRun{program: overrideProgram, keys: []string{k.overrides}, args: args}).Result()
	if err != nil && !strings.Contains(err.Error(), override.FullReply) {
		err = misconfigured(err, k.s.prefix, k.s.cluster)
	}
	return err
}

func (k *keeper) PutTop(ctx context.Context, life, age time.Duration, fields []string) error {
	args := make([]any, 0, 3+len(fields))
	args = append(args, "put", life.Milliseconds(), age.Milliseconds())
	for _, f := range fields {
		args = append(args, f)
	}
	_, err := k.s.fn.run(ctx, k.s.client, programRun{program: topProgram, keys: []string{k.top}, args: args}).Result()
	return misconfigured(err, k.s.prefix, k.s.cluster)
}

func (k *keeper) GetTop(ctx context.Context, age time.Duration, window, policy string) ([]string, error) {
	return k.run(ctx, topProgram, k.top, "get", age.Milliseconds(), window, policy)
}
