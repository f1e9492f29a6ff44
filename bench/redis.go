package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
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

// startCluster starts a throwaway Redis Cluster of n masters from PATH,
// with the library's test starter, as startRedis does a server.
func startCluster(n int) (*redistest.Cluster, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (%v); install it to run -cluster", err)
	}
	return redistest.StartCluster(n)
}

// redisTarget is the Redis every Redis-backed contender talks to.
type redisTarget struct {
	opts *redis.Options // parsed from -redis, or pointing at our server (with -cluster, its first master)
	// cluster holds the masters' addresses with -cluster: the contenders
	// get a redis.ClusterClient seeded with them, and flush and the CPU
	// meter go to every master.
	cluster []string
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

// newUniversal is newClient, or with -cluster a redis.ClusterClient over
// the masters with the same pool size per node; deadline is
// newDeadlineClient's ContextTimeoutEnabled.
func (t *redisTarget) newUniversal(deadline bool) redis.UniversalClient {
	if len(t.cluster) == 0 {
		if deadline {
			return t.newDeadlineClient()
		}
		return t.newClient()
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: t.cluster, PoolSize: poolSize, ContextTimeoutEnabled: deadline})
}

// servers returns the options of every server of the target: the one
// server, or every master of the cluster.
func (t *redisTarget) servers() []*redis.Options {
	if len(t.cluster) == 0 {
		return []*redis.Options{t.opts}
	}
	var all []*redis.Options
	for _, addr := range t.cluster {
		o := *t.opts
		o.Addr = addr
		all = append(all, &o)
	}
	return all
}

// flush empties every database of the target, on every server, so that
// no cell sees another's keys.
func (t *redisTarget) flush(ctx context.Context) error {
	for _, o := range t.servers() {
		c := redis.NewClient(o)
		err := c.FlushAll(ctx).Err()
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
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

// cpuMeter reads the CPU time the Redis servers have used, from INFO
// cpu, over one client per server kept for the cell so that no dial falls
// between two readings.
type cpuMeter struct{ cs []*redis.Client }

func (t *redisTarget) newCPUMeter() *cpuMeter {
	m := &cpuMeter{}
	for _, o := range t.servers() {
		o.PoolSize = 1
		m.cs = append(m.cs, redis.NewClient(o))
	}
	return m
}

// read returns used_cpu_sys + used_cpu_user so far, summed over the
// servers (every master of a cluster).
func (m *cpuMeter) read(ctx context.Context) (time.Duration, error) {
	var total time.Duration
	for _, c := range m.cs {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, err
		}
		cpu, err := parseInfoCPU(info)
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	return total, nil
}

func (m *cpuMeter) close() {
	for _, c := range m.cs {
		c.Close()
	}
}

// parseInfoCPU returns used_cpu_sys + used_cpu_user (seconds, with
// microseconds) of an INFO cpu reply: the server process's CPU time, all
// its threads together.
func parseInfoCPU(info string) (time.Duration, error) {
	var total time.Duration
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s < 0 {
			return 0, fmt.Errorf("INFO cpu: %s is %q, not a number of seconds", k, v)
		}
		total += time.Duration(s * float64(time.Second))
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("INFO cpu: used_cpu_sys and used_cpu_user not both found")
	}
	return total, nil
}

// cpuPer formats the Redis CPU time spent per operation, in µs, or ""
// when it was not measured or nothing was done.
func cpuPer(cpu time.Duration, measured bool, ops uint64) string {
	if !measured || ops == 0 {
		return ""
	}
	us := float64(cpu) / float64(time.Microsecond) / float64(ops)
	if us < 10 {
		return fmt.Sprintf("%.2f", us)
	}
	return fmt.Sprintf("%.1f", us)
}
