package store

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// BenchmarkClusterBatch decides a fixed window for 10,000 keys from 64
// callers on a 3-master Redis Cluster, with the store's batching and
// without (MaxBatch: 1), and on a single server, all started on this
// machine. It reports decisions/s and the CPU time, user and system, the
// Redis servers spent per decision, summed over the cluster's masters.
func BenchmarkClusterBatch(b *testing.B) {
	cluster := redistest.RequireCluster(b, 3)
	single := redistest.Require(b)
	clusterClient := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), PoolSize: 64})
	defer clusterClient.Close()
	singleClient := redis.NewClient(&redis.Options{Addr: single.Addr, PoolSize: 64})
	defer singleClient.Close()
	var masters []*redis.Client
	for _, m := range cluster.Masters {
		c := redis.NewClient(&redis.Options{Addr: m.Addr})
		defer c.Close()
		masters = append(masters, c)
	}
	for _, bc := range []struct {
		name     string
		client   RedisClient
		servers  []*redis.Client // whose CPU is counted
		maxBatch int
	}{
		{"cluster-batched", clusterClient, masters, 0},
		{"cluster-unbatched", clusterClient, masters, 1},
		{"single-batched", singleClient, []*redis.Client{singleClient}, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
			s := newStore(b, bc.client, RedisOptions{Prefix: prefix, MaxBatch: bc.maxBatch})
			benchCallers(b, s, bc.servers)
		})
	}
}

// benchCallers decides a fixed window for 10,000 keys in turn from 64
// parallel callers, whatever the number of cores, and reports decisions/s
// and the CPU time servers spent per decision.
func benchCallers(b *testing.B, s ratelimit.Store, servers []*redis.Client) {
	l := limitsOf(b, benchLimits["fixed-window"])
	redisCPU := func() time.Duration {
		var sum time.Duration
		for _, c := range servers {
			sum += cpuTime(b, c)
		}
		return sum
	}
	b.ReportAllocs()
	b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	before := redisCPU()
	b.ResetTimer()
	allowInTurn(b, s, l)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(redisCPU()-before)/float64(time.Microsecond)/float64(b.N), "redis-cpu-µs/op")
}
