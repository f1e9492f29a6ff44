package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// The benchmarks run on a real redis-server; the peer comparison lives in
// the separate module bench/.

var benchLimits = map[string]ratelimit.Limit{
	"fixed-window":   ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow),
	"sliding-log":    ratelimit.PerMinute(100_000).Using(ratelimit.SlidingLog),
	"sliding-window": ratelimit.PerMinute(1_000_000),
	"token-bucket":   ratelimit.PerMinute(1_000_000).Using(ratelimit.TokenBucket),
}

// BenchmarkRedis decides for many keys, all allowed.
func BenchmarkRedis(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(b).Addr, PoolSize: 64})
	defer client.Close()
	for _, name := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket"} {
		l := benchLimits[name]
		b.Run(name, func(b *testing.B) {
			benchManyKeys(b, newStore(b, client, RedisOptions{Prefix: "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"}), l, client)
		})
	}
}

// BenchmarkFallback is BenchmarkRedis through a Fallback, the production
// configuration: what the wrapper costs on the healthy path.
func BenchmarkFallback(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(b).Addr, PoolSize: 64, ContextTimeoutEnabled: true})
	defer client.Close()
	for _, name := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket"} {
		l := benchLimits[name]
		b.Run(name, func(b *testing.B) {
			f, err := NewFallback(newStore(b, client, RedisOptions{Prefix: "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"}), FallbackOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			benchManyKeys(b, f, l, client)
		})
	}
}

// benchManyKeys decides l for 10,000 keys in turn from 64 parallel
// callers on 2 cores, as the bench module does. It reports the CPU time
// per decision of this process and, with client set, of Redis: on two
// cores the two compete, and decisions/s alone varies from run to run
// more than either.
func benchManyKeys(b *testing.B, s ratelimit.Store, limit ratelimit.Limit, client *redis.Client) {
	l := limitsOf(b, limit) // built once, as a Limiter does
	b.ReportAllocs()
	goCPU, redisCPU := cpuTime(b, nil), cpuTime(b, client)
	defer func() {
		b.ReportMetric(float64(cpuTime(b, nil)-goCPU)/float64(time.Microsecond)/float64(b.N), "go-cpu-µs/op")
		if client != nil {
			b.ReportMetric(float64(cpuTime(b, client)-redisCPU)/float64(time.Microsecond)/float64(b.N), "redis-cpu-µs/op")
		}
	}()
	b.SetParallelism(32)
	allowInTurn(b, s, l)
}

// allowInTurn has b's parallel callers ask s to admit requests for 10,000
// keys in turn, under l.
func allowInTurn(b *testing.B, s ratelimit.Store, l *ratelimit.Limits) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			key := "k" + strconv.FormatInt(n.Add(1)%10_000, 10)
			if _, err := s.Allow(ctx, key, 1, l); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGoRedisBaseline is go-redis alone running a script of the
// store's shape (one key, five arguments, a short string reply): the
// allocations that are go-redis's own.
func BenchmarkGoRedisBaseline(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(b).Addr})
	defer client.Close()
	script := redis.NewScript("return '1 999 59999000 0'")
	keys := []string{"rl:{k}:f60000"}
	args := []any{1, "f", "1000000", "60000", "0"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := script.Run(context.Background(), client, keys, args...).Text(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemory decides for many keys, all allowed, as the bench
// module's many-keys workload does: 100,000 keys made beforehand, each of
// 64 callers on 2 cores walking them from its own place, and room for
// them all. Building the key in the loop would allocate, and measure
// that instead of the store. On a shared machine, go-cpu-µs/op varies
// less than ns/op.
func BenchmarkMemory(b *testing.B) {
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%06d", i)
	}
	for _, name := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket"} {
		b.Run(name, func(b *testing.B) {
			m, err := memory.New(memory.Options{MaxKeys: 1 << 18})
			if err != nil {
				b.Fatal(err)
			}
			l := limitsOf(b, benchLimits[name])
			var callers atomic.Int64
			b.ReportAllocs()
			cpu := cpuTime(b, nil)
			defer func() {
				b.ReportMetric(float64(cpuTime(b, nil)-cpu)/float64(time.Microsecond)/float64(b.N), "go-cpu-µs/op")
			}()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				k := int(callers.Add(1)*7919) % len(keys)
				for pb.Next() {
					if _, err := m.Allow(ctx, keys[k], 1, l); err != nil {
						b.Fatal(err)
					}
					if k++; k == len(keys) {
						k = 0
					}
				}
			})
		})
	}
}

// BenchmarkMemoryHotKey decides one key over and over, denied: the path a
// flood from one client takes.
func BenchmarkMemoryHotKey(b *testing.B) {
	m, _ := memory.New(memory.Options{})
	l := limitsOf(b, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.TokenBucket))
	ctx := context.Background()
	m.Allow(ctx, "hot", 1, l)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if d, err := m.Allow(ctx, "hot", 1, l); err != nil || d.Allowed {
				b.Fatal("want a denial")
			}
		}
	})
}

// cpuTime returns the CPU time, user and system, this process has used,
// or with client set, the Redis server behind it.
func cpuTime(b *testing.B, client *redis.Client) time.Duration {
	if client == nil {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			total += v
		}
	}
	return time.Duration(total * float64(time.Second))
}

// instantClient answers every script at once with one allowed decision of
// one limit, so that a benchmark measures the Go side alone; Check's
// EVAL finds nothing refused.
type instantClient struct{ RedisClient }

func (instantClient) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetVal("")
	return c
}

func (instantClient) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetVal("1 999 59999000 0 60000000")
	return c
}

// BenchmarkGoSide decides with a client that answers at once, from one
// caller, so that every decision runs alone: the CPU the bare store and
// the Fallback spend in Go per decision, Redis and the network aside.
func BenchmarkGoSide(b *testing.B) {
	l := limitsOf(b, benchLimits["fixed-window"])
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	r, err := NewRedis(instantClient{}, RedisOptions{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := NewFallback(r, FallbackOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	f.impl.AssumeClock() // the client has no clock to read
	for _, s := range []struct {
		name string
		s    ratelimit.Store
	}{{"redis", r}, {"fallback", f}} {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.s.Allow(ctx, keys[i%len(keys)], 1, l); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkUsage decides a request under a limit charged from usage and
// ends it, for many keys, on Redis and on the Memory store: since issue
// 49 the decision reserves the request's cost and the end settles it.
// Run it beside the code of before (bench/ compares two revisions) for
// the cost of a reservation; "plain" is a limit not charged so, decided
// alone, for scale.
func BenchmarkUsage(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(b).Addr, PoolSize: 64})
	defer client.Close()
	usage := ratelimit.Limit{Quota: 1_000_000_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Usage: true}
	plain := ratelimit.Limit{Quota: 1_000_000_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow}
	stores := map[string]func(b *testing.B) ratelimit.Store{
		"redis": func(b *testing.B) ratelimit.Store {
			return newStore(b, client, RedisOptions{Prefix: "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"})
		},
		"memory": func(b *testing.B) ratelimit.Store {
			m, err := memory.New(memory.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return m
		},
	}
	for _, store := range []string{"redis", "memory"} {
		for _, kind := range []string{"usage", "plain"} {
			b.Run(store+"/"+kind, func(b *testing.B) {
				s, l := stores[store](b), limitsOf(b, plain)
				if kind == "usage" {
					l = limitsOf(b, usage)
				}
				var n atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						key := "k" + strconv.FormatInt(n.Add(1)%10_000, 10)
						d, err := s.Allow(ctx, key, 10, l)
						if err != nil {
							b.Fatal(err)
						}
						if kind == "usage" {
							if _, err := s.End(ctx, key, 7, l, d); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			})
		}
	}
}
