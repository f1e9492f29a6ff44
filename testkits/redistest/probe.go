package redistest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// pollInterval is how often [poll] checks a state it waits for.
const pollInterval = 50 * time.Millisecond

// poll calls check until it returns nil or ctx ends. The error then says
// what was awaited and what the last check found missing.
func poll(ctx context.Context, what string, check func(ctx context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %s: %w; last check: %v", what, ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}

// probeOptions are the options of the one-shot clients that check a
// server's state: short timeouts and no retries, so that a dead or paused
// server fails a check quickly instead of stalling a poll.
func probeOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:            addr,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		DialTimeout:     300 * time.Millisecond,
		ReadTimeout:     500 * time.Millisecond,
		WriteTimeout:    500 * time.Millisecond,
		PoolSize:        1,
	}
}

// do sends one command to addr over a connection of its own.
func do(ctx context.Context, addr string, args ...any) *redis.Cmd {
	c := redis.NewClient(probeOptions(addr))
	defer c.Close()
	return c.Do(ctx, args...)
}

// infoField returns the value of field in the reply of INFO section, or of
// CLUSTER INFO when section is "cluster-info": "master" for field "role".
func infoField(ctx context.Context, addr, section, field string) (string, error) {
	args := []any{"INFO", section}
	if section == "cluster-info" {
		args = []any{"CLUSTER", "INFO"}
	}
	info, err := do(ctx, addr, args...).Text()
	if err != nil {
		return "", fmt.Errorf("%s: %w", addr, err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: no %s in %v", addr, field, args)
}

// role returns what addr reports as its replication role: "master" or "slave".
func role(ctx context.Context, addr string) (string, error) {
	return infoField(ctx, addr, "replication", "role")
}
