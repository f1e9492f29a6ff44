package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/didip/tollbooth/v8"
	"github.com/go-chi/httprate"
	httprateredis "github.com/go-chi/httprate-redis"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ulstdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// keyHeader is the request header every HTTP contender keys by.
const keyHeader = "X-API-Key"

// Families of the HTTP table: "vs ours" divides a row's requests/s by
// that of its family's baseline.
const (
	httpFamBare   = "none"
	httpFamRedis  = "redis"
	httpFamMemory = "in-process"
)

// httpBaselines names the row of this library each HTTP family compares
// to.
var httpBaselines = map[string]string{
	httpFamRedis:  "ratelimit/redis/fixed-window",
	httpFamMemory: "ratelimit/memory/fixed-window",
}

// An httpContender is one row of the HTTP table: a net/http middleware
// configured one way, in front of the same handler.
type httpContender struct {
	name   string // unique; matched by -only together with the workload id
	family string // httpFamBare, httpFamRedis or httpFamMemory
	redis  bool   // needs the Redis server (FLUSHALL before each cell)
	note   string // how the limit and key were given to it; printed under the table
	// wrap returns next behind a fresh middleware enforcing l per value
	// of keyHeader, and what to release after the cell.
	wrap func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error)
}

// httpContenders is the list of rows, in table order. A row is added as
// in contenders: one entry with a name, a family and a wrap function.
func httpContenders() []*httpContender {
	return []*httpContender{
		{
			name:   "none",
			family: httpFamBare,
			note:   "the handler alone, no middleware: what the server, the load generator and the loopback cost.",
			wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
				return next, func() {}, nil
			},
		},
		oursHTTP("fixed-window", ratelimit.FixedWindow, ""),
		oursHTTP("sliding-log", ratelimit.SlidingLog, ""),
		oursHTTP("sliding-window", ratelimit.SlidingWindow, ""),
		oursHTTP("token-bucket", ratelimit.TokenBucket, ""),
		oursHTTP("fixed-window", ratelimit.FixedWindow, "hmac-key"),
		oursHTTP("fixed-window", ratelimit.FixedWindow, "leased"),
		oursMemoryHTTP(""),
		oursMemoryHTTP("x-headers"),
		{
			name:   "ulule/limiter",
			family: httpFamRedis,
			redis:  true,
			note:   "ulule/limiter/v3 `drivers/middleware/stdlib` `NewMiddleware(limiter.New(store, Rate{Period: window, Limit: quota}), WithKeyGetter(the header's value), WithErrorHandler(500))` on `drivers/store/redis` (prefix `ulule`): a fixed window opened by the key's first request, one INCR script run per request, denials included. Its default error handler panics; this one answers 500.",
			wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
				c := e.redis.newClient()
				st, err := ulredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: "ulule"})
				if err != nil {
					c.Close()
					return nil, nil, err
				}
				mw := ulstdlib.NewMiddleware(ulule.New(st, ulule.Rate{Period: l.Window, Limit: int64(l.Quota)}),
					ulstdlib.WithKeyGetter(func(r *http.Request) string { return r.Header.Get(keyHeader) }),
					ulstdlib.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
						http.Error(w, err.Error(), http.StatusInternalServerError)
					}),
				)
				return mw.Handler(next), func() { c.Close() }, nil
			},
		},
		{
			name:   "go-chi/httprate-redis",
			family: httpFamRedis,
			redis:  true,
			note:   "go-chi/httprate `LimitBy(quota, window, the header's value, httprateredis.WithRedisLimitCounter(&Config{Client: client, FallbackDisabled: true}))` (httprate-redis v0.5.4): a sliding window counter over two fixed windows, an MGET then a MULTI INCRBY+EXPIRE per allowed request, an MGET per denial. httprate holds one mutex per limiter around both Redis calls, so requests are decided one at a time. The in-memory fallback is off so that errors show (as 428); by default it would answer from process memory on a Redis error.",
			wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
				c := e.redis.newClient()
				mw := httprate.LimitBy(l.Quota, l.Window, headerValue,
					httprateredis.WithRedisLimitCounter(&httprateredis.Config{Client: c, FallbackDisabled: true}))
				return mw(next), func() { c.Close() }, nil
			},
		},
		{
			name:   "throttled/throttled",
			family: httpFamRedis,
			redis:  true,
			note:   "throttled/v2 `HTTPRateLimiterCtx{RateLimiter: GCRA, VaryBy: &VaryBy{Headers: []string{\"X-API-Key\"}}}.RateLimit` with `NewGCRARateLimiterCtx(goredisstore.v9, RateQuota{MaxRate: PerDuration(quota, window), MaxBurst: quota-1})`: compare-and-swap over several commands per request, up to 10 attempts; errors answer 500.",
			wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
				c := e.redis.newClient()
				st, err := goredisstore.NewCtx(c, "throttled:")
				if err != nil {
					c.Close()
					return nil, nil, err
				}
				lim, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
					MaxRate:  throttled.PerDuration(l.Quota, l.Window),
					MaxBurst: l.Quota - 1,
				})
				if err != nil {
					c.Close()
					return nil, nil, err
				}
				mw := &throttled.HTTPRateLimiterCtx{
					RateLimiter: lim,
					VaryBy:      &throttled.VaryBy{Headers: []string{keyHeader}},
				}
				return mw.RateLimit(next), func() { c.Close() }, nil
			},
		},
		{
			name:   "go-chi/httprate",
			family: httpFamMemory,
			note:   "go-chi/httprate v0.16.1 `LimitBy(quota, window, the header's value)`, its in-memory counter: a sliding window counter over two fixed windows, behind one mutex per limiter.",
			wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
				return httprate.LimitBy(l.Quota, l.Window, headerValue)(next), func() {}, nil
			},
		},
		{
			name:   "didip/tollbooth",
			family: httpFamMemory,
			note:   "didip/tollbooth/v8 v8.0.1 `HTTPMiddleware(NewLimiter(quota/window in seconds, nil).SetBurst(quota).SetIgnoreURL(true).SetHeader(\"X-API-Key\", nil))`: an x/time/rate token bucket per remote IP and header value (all requests come from 127.0.0.1, so per header value) in an expirable cache behind one mutex per limiter. It answers 429 with its own message and sets its headers with `fmt.Sprintf` on every request.",
			wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
				lmt := tollbooth.NewLimiter(float64(l.Quota)/l.Window.Seconds(), nil).
					SetBurst(l.Quota).
					SetIgnoreURL(true).
					SetHeader(keyHeader, nil)
				return tollbooth.HTTPMiddleware(lmt)(next), func() {}, nil
			},
		},
	}
}

// headerValue is the peers' key function: the header's value, as is.
func headerValue(r *http.Request) (string, error) { return r.Header.Get(keyHeader), nil }

// plainHeaderKey is this library's KeyFunc reading the same header as the
// peers, unhashed, as they do ([ratelimit.HeaderKey] hashes it).
func plainHeaderKey(req ratelimit.Request) (string, error) {
	v := req.(*http.Request).Header.Get(keyHeader)
	if v == "" {
		return "", fmt.Errorf("%w: header %s is missing", ratelimit.ErrInvalid, keyHeader)
	}
	return "header:" + v, nil
}

// hmacSecret is the secret of the row keyed by ratelimit.HeaderKey: a
// constant, since only the hash's cost matters here.
var hmacSecret = []byte("bench: not a secret, 32 bytes...")

// oursHTTP is this library's middleware on Redis with one algorithm,
// keyed by the header's plain value, or by ratelimit.HeaderKey when hmac.
func oursHTTP(algo string, a ratelimit.Algorithm, variant string) *httpContender {
	name := "ratelimit/redis/" + algo
	note := "this library: `ratelimit.New(store.NewRedis(client, store.RedisOptions{}), \"bench\", WithLimits(ratelimit.Limit{Quota: quota, Window: window}.Using(ratelimit." + algoIdent(a) + ")), WithKey(the header's value), WithErrorHandler(ratelimit.FailClosed))`" + oursDefaults(a) + "; `Limiter.Handler`, which sets the draft and X- rate limit headers on every response and denies with a 429 (problem details). The key function returns `\"header:\"` and the value, unhashed as the peers have it. FailClosed (503) rather than the default FailOpen, so that an error shows as a status and is not served."
	key := plainHeaderKey
	switch variant {
	case "hmac-key":
		note = "this library as `ratelimit/redis/fixed-window`, keyed by `ratelimit.HeaderKey(\"X-API-Key\", secret)`, the key function the library recommends for secrets: the key is an HMAC-SHA256 of the value."
		k, err := ratelimit.HeaderKey(keyHeader, hmacSecret)
		if err != nil {
			panic(err) // the secret is a constant of the right length
		}
		key = k
	case "leased":
		note = "this library as `ratelimit/redis/fixed-window`, the limit `Leased`: each key's requests are decided in process from slices of its quota taken from Redis ahead (docs/limits.md#hot-keys-leased-limits)."
	}
	if variant != "" {
		name += "," + variant
	}
	return &httpContender{
		name:   name,
		family: httpFamRedis,
		redis:  true,
		note:   note,
		wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
			c := e.redis.newClient()
			s, err := store.NewRedis(c, store.RedisOptions{})
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			limit := ratelimitLimit(l, a)
			limit.Leased = variant == "leased"
			lim, err := ratelimit.New(s, "bench", ratelimit.WithLimits(limit), ratelimit.WithKey(key), ratelimit.WithErrorHandler(ratelimit.FailClosed))
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			return lim.Handler(next), func() { c.Close() }, nil
		},
	}
}

// oursMemoryHTTP is this library's middleware on the Memory store, with
// the default headers, or with variant "x-headers" only the X-RateLimit-*
// ones, the three go-chi/httprate sends: what the draft's two fields cost.
func oursMemoryHTTP(variant string) *httpContender {
	name := "ratelimit/memory/fixed-window"
	note := "this library on `store.NewMemory(store.MemoryOptions{})` (room for 100,000 keys), otherwise as `ratelimit/redis/fixed-window`."
	var opts []ratelimit.Option
	if variant == "x-headers" {
		name += ",x-headers"
		note = "this library as `ratelimit/memory/fixed-window`, with `WithHeaders(ratelimit.Headers{NoDraft: true})`: X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset only, the three headers go-chi/httprate sends, without the draft's RateLimit-Policy and RateLimit."
		opts = append(opts, ratelimit.WithHeaders(ratelimit.Headers{NoDraft: true}))
	}
	return &httpContender{
		name:   name,
		family: httpFamMemory,
		note:   note,
		wrap: func(e *env, l limitSpec, next http.Handler) (http.Handler, func(), error) {
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				return nil, nil, err
			}
			lim, err := newOursLimiter(s, l, ratelimit.FixedWindow, plainHeaderKey, opts...)
			if err != nil {
				return nil, nil, err
			}
			return lim.Handler(next), func() {}, nil
		},
	}
}

func newOursLimiter(s ratelimit.Store, l limitSpec, a ratelimit.Algorithm, key ratelimit.KeyFunc, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
	return ratelimit.New(s, "bench", append([]ratelimit.Option{
		ratelimit.WithLimits(ratelimitLimit(l, a)),
		ratelimit.WithKey(key),
		ratelimit.WithErrorHandler(ratelimit.FailClosed),
	}, opts...)...)
}

// describeLimit writes l for the report: "100,000 per hour".
func describeLimit(l limitSpec) string {
	w := l.Window.String()
	if l.Window == time.Hour {
		w = "hour"
	}
	return fmt.Sprintf("%s per %s", formatCount(uint64(l.Quota)), w)
}
