package store

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
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
			benchManyKeys(b, newStore(b, client, WithPrefix("bench:"+strconv.FormatInt(time.Now().UnixNano(), 36)+":")), l)
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
			f, err := NewFallback(newStore(b, client, WithPrefix("bench:"+strconv.FormatInt(time.Now().UnixNano(), 36)+":")))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			benchManyKeys(b, f, l)
		})
	}
}

// benchManyKeys decides l for 10,000 keys in turn from 64 parallel
// callers on 2 cores, as the bench module does.
func benchManyKeys(b *testing.B, s ratelimit.Store, l ratelimit.Limit) {
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
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

// BenchmarkMemory decides for many keys, all allowed.
func BenchmarkMemory(b *testing.B) {
	for _, name := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket"} {
		b.Run(name, func(b *testing.B) {
			m, _ := NewMemory()
			benchManyKeys(b, m, benchLimits[name])
		})
	}
}

// BenchmarkMemoryHotKey decides one key over and over, denied: the path a
// flood from one client takes.
func BenchmarkMemoryHotKey(b *testing.B) {
	m, _ := NewMemory()
	l := ratelimit.PerHour(1).Using(ratelimit.TokenBucket)
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
