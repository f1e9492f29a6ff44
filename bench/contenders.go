package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	sethvargo "github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"github.com/zeromicro/go-zero/core/limit"
	"github.com/zeromicro/go-zero/core/logx"
	zredis "github.com/zeromicro/go-zero/core/stores/redis"
	"golang.org/x/time/rate"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// Families group rows that "vs ours" compares: each row's decisions/s is
// divided by that of its family's baseline row in the same workload and
// caller count. Rows of this library (ours) always show 1.00.
const (
	famFixed  = "redis fixed-window"
	famToken  = "redis token-bucket"
	famOurs   = "redis (ours only)"
	famMemory = "in-process"
)

// baselines names the row of this library that each family compares to.
var baselines = map[string]string{
	famFixed:  "ratelimit/redis/fixed-window",
	famToken:  "ratelimit/redis/token-bucket",
	famMemory: "ratelimit/memory/token-bucket",
}

// A contender is one row of the table: a rate limiter configured one way.
type contender struct {
	name   string // unique; matched by -only together with the workload id
	family string // see famFixed etc.
	ours   bool   // a row of this library: "vs ours" is 1.00
	redis  bool   // needs the Redis server (FLUSHALL before each cell)
	// cluster: the row runs on a Redis Cluster too (with -cluster).
	cluster bool
	// note says how the workload's limit was mapped onto the contender's
	// API, and anything else a reader must know; printed under the table.
	note string
	// caveat, when set, explains in the anomalies list why this
	// contender's wrong decisions are expected (for example a limit its
	// API cannot express).
	caveat string
	// build returns a fresh instance enforcing l per key, for one cell.
	build func(e *env, l limitSpec) (instance, error)
}

// instance is a contender set up for one cell.
type instance struct {
	// allow decides one request of cost 1 for key.
	allow func(ctx context.Context, key string) (allowed bool, err error)
	// close releases what build acquired (clients, goroutines).
	close func()
	// hiddenErrors, when set, returns a running count of errors the
	// contender handled without returning them (for example by logging
	// them and deciding in process); they are added to the errors column.
	hiddenErrors func() uint64
}

// hidden returns the count of hidden errors so far; 0 when the
// contender hides none.
func (i instance) hidden() uint64 {
	if i.hiddenErrors == nil {
		return 0
	}
	return i.hiddenErrors()
}

// env is what contenders share: the Redis target and go-zero's log
// counter.
type env struct {
	redis *redisTarget
	logx  *logCounter
}

// contenders is the list of rows, in table order.
//
// To add a row (another library, or a variant of this one, for example
// with an option that does not exist yet), append one entry here: a name,
// a family for "vs ours", and a build function returning an instance.
// Nothing else needs to change.
func contenders() []*contender {
	return []*contender{
		ours("fixed-window", famFixed, ratelimit.FixedWindow),
		ours("sliding-log", famOurs, ratelimit.SlidingLog),
		ours("sliding-window", famOurs, ratelimit.SlidingWindow),
		ours("token-bucket", famToken, ratelimit.TokenBucket),
		// The same store with one lever off, to show what each lever does.
		oursVariant("ratelimit/redis/fixed-window,no-batching", famFixed, ratelimit.FixedWindow, "batching off (`store.RedisOptions{MaxBatch: 1}`): each request its own script run", 0, store.RedisOptions{MaxBatch: 1}),
		oursVariant("ratelimit/redis/fixed-window,no-deny-cache", famFixed, ratelimit.FixedWindow, "the deny cache off (`store.RedisOptions{DenyCacheSize: -1}`): every denial asks Redis", 0, store.RedisOptions{DenyCacheSize: -1}),
		oursVariant("ratelimit/redis/fixed-window,autopipeliner", famFixed, ratelimit.FixedWindow, "the client wrapped in go-redis's AutoPipeliner (`client.AutoPipeline()`), which the store cannot batch for, since it may not be one server", viaAutoPipeliner, store.RedisOptions{}),
		oursVariant("ratelimit/redis/fixed-window,fallback", famFixed, ratelimit.FixedWindow, "the store wrapped in `store.NewFallback` with its defaults (the production configuration; the client has `ContextTimeoutEnabled`)", inFallback, store.RedisOptions{}),
		oursVariant("ratelimit/redis/token-bucket,fallback", famToken, ratelimit.TokenBucket, "the store wrapped in `store.NewFallback` with its defaults (the production configuration; the client has `ContextTimeoutEnabled`)", inFallback, store.RedisOptions{}),
		redisRate(false),
		redisRate(true),
		{
			name:   "throttled/throttled",
			family: famToken,
			redis:  true,
			note:   "throttled/v2 `GCRARateLimiterCtx` on `goredisstore.v9` with `RateQuota{MaxRate: PerDuration(quota, window), MaxBurst: quota-1}` (throttled's burst is MaxBurst+1); `RateLimitCtx(ctx, key, 1)`. Its store is compare-and-swap (GET+TIME, then SETNX or a CAS script), at most 10 attempts by default.",
			build: func(e *env, l limitSpec) (instance, error) {
				c := e.redis.newClient()
				st, err := goredisstore.NewCtx(c, "throttled:")
				if err != nil {
					c.Close()
					return instance{}, err
				}
				lim, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
					MaxRate:  throttled.PerDuration(l.Quota, l.Window),
					MaxBurst: l.Quota - 1,
				})
				if err != nil {
					c.Close()
					return instance{}, err
				}
				return instance{
					allow: func(ctx context.Context, key string) (bool, error) {
						limited, _, err := lim.RateLimitCtx(ctx, key, 1)
						if err != nil {
							return false, err
						}
						return !limited, nil
					},
					close: func() { c.Close() },
				}, nil
			},
		},
		{
			name:   "ulule/limiter",
			family: famFixed,
			redis:  true,
			note:   "ulule/limiter/v3 with `drivers/store/redis` (`NewStoreWithOptions`, prefix `ulule`), `Rate{Period: window, Limit: quota}`; `Get(ctx, key)`, allowed when `!Reached`. A fixed window opened by the key's first request; every call INCRs, denials included.",
			build: func(e *env, l limitSpec) (instance, error) {
				c := e.redis.newClient()
				st, err := ulredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: "ulule"})
				if err != nil {
					c.Close()
					return instance{}, err
				}
				lim := ulule.New(st, ulule.Rate{Period: l.Window, Limit: int64(l.Quota)})
				return instance{
					allow: func(ctx context.Context, key string) (bool, error) {
						r, err := lim.Get(ctx, key)
						if err != nil {
							return false, err
						}
						return !r.Reached, nil
					},
					close: func() { c.Close() },
				}, nil
			},
		},
		{
			name:   "go-zero/PeriodLimit",
			family: famFixed,
			redis:  true,
			note:   "go-zero `limit.NewPeriodLimit(window in seconds, quota, store, \"periodlimit:\")`; `TakeCtx`, allowed on `Allowed` or `HitQuota`. go-zero talks to Redis through its own wrapper (`core/stores/redis`, `MustNewRedis(RedisConf{Host, Type: node})`), which builds its own go-redis v9 client: its pool size is not configurable (go-redis's default, 10×GOMAXPROCS) and it adds a circuit breaker and duration/metrics hooks. Every call INCRs, denials included.",
			build: func(e *env, l limitSpec) (instance, error) {
				z, err := e.goZeroRedis()
				if err != nil {
					return instance{}, err
				}
				lim := limit.NewPeriodLimit(int(l.Window/time.Second), l.Quota, z, "periodlimit:")
				return instance{
					allow: func(ctx context.Context, key string) (bool, error) {
						code, err := lim.TakeCtx(ctx, key)
						if err != nil {
							return false, err
						}
						return code == limit.Allowed || code == limit.HitQuota, nil
					},
					close:        func() {},
					hiddenErrors: e.logx.errors,
				}, nil
			},
		},
		{
			name:   "go-zero/TokenLimiter",
			family: famToken,
			redis:  true,
			caveat: "expected: go-zero's TokenLimiter cannot refill slower than 1 token per second, so the hot key gets about one token back per second",
			note:   "go-zero `limit.NewTokenLimiter(rate, burst, store, key)` through the same go-zero Redis wrapper as PeriodLimit. Its rate is a whole number per second, so the rate is rounded up to at least 1/s (100,000/h becomes 28/s; 1/h becomes 1/s, so the hot key regains one token per second and about one call per second is allowed) and the burst is the quota. A TokenLimiter is bound to one key at construction: this row keeps a `sync.Map` from key to limiter, created on first use (Load, then LoadOrStore). The script takes the time from the app (`time.Now().Unix()`, whole seconds). It never returns an error: on a Redis error it logs and decides with an in-process x/time/rate limiter; this benchmark counts those logged errors in the errors column.",
			build: func(e *env, l limitSpec) (instance, error) {
				z, err := e.goZeroRedis()
				if err != nil {
					return instance{}, err
				}
				perSec := max(1, int((int64(l.Quota)*int64(time.Second)+int64(l.Window)-1)/int64(l.Window)))
				var limiters sync.Map
				return instance{
					allow: func(ctx context.Context, key string) (bool, error) {
						v, ok := limiters.Load(key)
						if !ok {
							v, _ = limiters.LoadOrStore(key, limit.NewTokenLimiter(perSec, l.Quota, z, key))
						}
						return v.(*limit.TokenLimiter).AllowCtx(ctx), nil
					},
					close:        func() {},
					hiddenErrors: e.logx.errors,
				}, nil
			},
		},
		oursMemory("fixed-window", ratelimit.FixedWindow),
		oursMemory("sliding-log", ratelimit.SlidingLog),
		oursMemory("sliding-window", ratelimit.SlidingWindow),
		oursMemory("token-bucket", ratelimit.TokenBucket),
		{
			name:   "sethvargo/go-limiter",
			family: famMemory,
			note:   "sethvargo/go-limiter `memorystore.New(&Config{Tokens: quota, Interval: window})` (other settings default: sweep every 6 h); `Take(ctx, key)`. One map behind a RWMutex, a lock per bucket; tokens refill at interval ticks.",
			build: func(e *env, l limitSpec) (instance, error) {
				st, err := sethvargo.New(&sethvargo.Config{Tokens: uint64(l.Quota), Interval: l.Window})
				if err != nil {
					return instance{}, err
				}
				return instance{
					allow: func(ctx context.Context, key string) (bool, error) {
						_, _, _, ok, err := st.Take(ctx, key)
						return ok, err
					},
					close: func() { _ = st.Close(context.Background()) },
				}, nil
			},
		},
		{
			name:   "x/time/rate",
			family: famMemory,
			note:   "golang.org/x/time/rate: one `rate.NewLimiter(rate.Every(window/quota), quota)` per key in a `sync.Map` (Load, then LoadOrStore on a miss); `Allow()`. Keys are never evicted.",
			build: func(e *env, l limitSpec) (instance, error) {
				every := rate.Every(l.Window / time.Duration(l.Quota))
				var limiters sync.Map
				return instance{
					allow: func(ctx context.Context, key string) (bool, error) {
						v, ok := limiters.Load(key)
						if !ok {
							v, _ = limiters.LoadOrStore(key, rate.NewLimiter(every, l.Quota))
						}
						return v.(*rate.Limiter).Allow(), nil
					},
					close: func() {},
				}, nil
			},
		},
	}
}

// ratelimitLimit is the workload's limit as this library's Limit.
func ratelimitLimit(l limitSpec, a ratelimit.Algorithm) ratelimit.Limit {
	return ratelimit.Limit{Quota: l.Quota, Window: l.Window}.Using(a)
}

// ours is this library's Redis store with one algorithm, as configured
// by default.
func ours(algo, family string, a ratelimit.Algorithm) *contender {
	c := oursVariant("ratelimit/redis/"+algo, family, a, "", 0, store.RedisOptions{})
	c.ours = true
	return c
}

// How a variant row uses the store.
const (
	viaAutoPipeliner = 1 << iota // the client is go-redis's AutoPipeliner
	inFallback                   // the store is wrapped in store.Fallback
)

// oursVariant is this library's Redis store with non-default options, a
// row compared with the default one; variant names the options for the
// note, how says how the store is used (viaAutoPipeliner, inFallback).
func oursVariant(name, family string, a ratelimit.Algorithm, variant string, how int, opts store.RedisOptions) *contender {
	note := "this library: `store.NewRedis(client, store.RedisOptions{})`, `Allow(ctx, key, 1, limits)` with `limits` built once, before the cell, by `ratelimit.NewLimits(ratelimit.Limit{Quota: quota, Window: window}.Using(ratelimit." + algoIdent(a) + "))`" + oursDefaults(a) + "."
	if variant != "" {
		note = "this library as above, with " + variant + "."
	}
	return &contender{
		name:    name,
		family:  family,
		redis:   true,
		cluster: how&viaAutoPipeliner == 0,
		note:    note,
		build: func(e *env, l limitSpec) (instance, error) {
			c := e.redis.newUniversal(how&inFallback != 0)
			var client store.RedisClient = c
			if how&viaAutoPipeliner != 0 {
				ap, err := c.(*redis.Client).AutoPipeline()
				if err != nil {
					c.Close()
					return instance{}, err
				}
				client = ap
			}
			r, err := store.NewRedis(client, opts)
			if err != nil {
				c.Close()
				return instance{}, err
			}
			var s ratelimit.Store = r
			closeAll := func() { c.Close() }
			if how&inFallback != 0 {
				f, err := store.NewFallback(r, store.FallbackOptions{})
				if err != nil {
					c.Close()
					return instance{}, err
				}
				s, closeAll = f, func() { f.Close(); c.Close() }
			}
			limits, err := ratelimit.NewLimits(ratelimitLimit(l, a))
			if err != nil {
				closeAll()
				return instance{}, err
			}
			return instance{
				allow: func(ctx context.Context, key string) (bool, error) {
					d, err := s.Allow(ctx, key, 1, limits)
					return d.Allowed, err
				},
				close: closeAll,
			}, nil
		},
	}
}

// oursMemory is this library's in-process store with one algorithm.
func oursMemory(algo string, a ratelimit.Algorithm) *contender {
	return &contender{
		name:   "ratelimit/memory/" + algo,
		family: famMemory,
		ours:   true,
		note:   "this library: `store.NewMemory(store.MemoryOptions{MaxKeys: 1 << 18})`, room for the whole 100,000-key space as the peers, which have no bound, have; the same `Allow` and limit as the Redis row" + oursDefaults(a) + ".",
		build: func(e *env, l limitSpec) (instance, error) {
			s, err := store.NewMemory(store.MemoryOptions{MaxKeys: 1 << 18})
			if err != nil {
				return instance{}, err
			}
			limits, err := ratelimit.NewLimits(ratelimitLimit(l, a))
			if err != nil {
				return instance{}, err
			}
			return instance{
				allow: func(ctx context.Context, key string) (bool, error) {
					d, err := s.Allow(ctx, key, 1, limits)
					return d.Allowed, err
				},
				close: func() {},
			}, nil
		},
	}
}

func algoIdent(a ratelimit.Algorithm) string {
	switch a {
	case ratelimit.FixedWindow:
		return "FixedWindow"
	case ratelimit.SlidingLog:
		return "SlidingLog"
	case ratelimit.SlidingWindow:
		return "SlidingWindow"
	case ratelimit.TokenBucket:
		return "TokenBucket"
	}
	return a.String()
}

func oursDefaults(a ratelimit.Algorithm) string {
	switch a {
	case ratelimit.TokenBucket:
		return " (burst defaults to quota)"
	case ratelimit.SlidingWindow:
		return " (precision defaults to window/10)"
	}
	return ""
}

// goZeroRedis returns go-zero's Redis wrapper pointed at the target.
// go-zero always uses database 0 and caches one client per address.
func (e *env) goZeroRedis() (*zredis.Redis, error) {
	o := e.redis.opts
	return zredis.NewRedis(zredis.RedisConf{
		Host: o.Addr,
		Type: zredis.NodeType,
		User: o.Username,
		Pass: o.Password,
		Tls:  o.TLSConfig != nil,
	})
}

// logCounter is go-zero's log writer here: it counts error-level logs
// (go-zero's TokenLimiter reports Redis failures only that way) and
// drops everything, so that the table is not interleaved with logs.
type logCounter struct{ n atomic.Uint64 }

func newLogCounter() *logCounter {
	c := &logCounter{}
	logx.DisableStat()
	logx.SetWriter(c)
	return c
}

func (c *logCounter) errors() uint64 { return c.n.Load() }

func (c *logCounter) Alert(any)                   {}
func (c *logCounter) Close() error                { return nil }
func (c *logCounter) Debug(any, ...logx.LogField) {}
func (c *logCounter) Error(any, ...logx.LogField) { c.n.Add(1) }
func (c *logCounter) Info(any, ...logx.LogField)  {}
func (c *logCounter) Severe(any)                  { c.n.Add(1) }
func (c *logCounter) Slow(any, ...logx.LogField)  {}
func (c *logCounter) Stack(any)                   { c.n.Add(1) }
func (c *logCounter) Stat(any, ...logx.LogField)  {}

var _ logx.Writer = (*logCounter)(nil)

// redisRate is go-redis/redis_rate, on the client or, with pipelined, on
// go-redis's AutoPipeliner over it, which sends the commands of
// concurrent callers together: its fastest configuration.
func redisRate(pipelined bool) *contender {
	c := &contender{
		name:   "go-redis/redis_rate",
		family: famToken,
		redis:  true,
		note:   "redis_rate/v10 (GCRA) `Allow` with `Limit{Rate: quota, Period: window, Burst: quota}`.",
	}
	if pipelined {
		c.name += ",autopipeliner"
		c.note = "redis_rate as above, on the client wrapped in go-redis's AutoPipeliner (`client.AutoPipeline()`), which sends concurrent callers' commands together."
	}
	c.build = func(e *env, l limitSpec) (instance, error) {
		rc := e.redis.newClient()
		var lim *redis_rate.Limiter
		if pipelined {
			ap, err := rc.AutoPipeline()
			if err != nil {
				rc.Close()
				return instance{}, err
			}
			lim = redis_rate.NewLimiter(ap)
		} else {
			lim = redis_rate.NewLimiter(rc)
		}
		rl := redis_rate.Limit{Rate: l.Quota, Period: l.Window, Burst: l.Quota}
		return instance{
			allow: func(ctx context.Context, key string) (bool, error) {
				r, err := lim.Allow(ctx, key, rl)
				if err != nil {
					return false, err
				}
				return r.Allowed > 0, nil
			},
			close: func() { rc.Close() },
		}, nil
	}
	return c
}
