package ratelimit_test

import (
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

// TestRateLimitPromise sends random traffic through a Limiter, on a
// Memory store and on a Redis store (miniredis), both with a pinned clock,
// and holds every response to what its headers say, read with an RFC 9651
// parser: each RateLimit item's promise that at most r more units pass
// under that policy before the instant t rounds up, which is later than
// t-1 seconds from the answer, checked against the units the traffic that
// follows gets through; and, on a 429, Retry-After no earlier than the
// t of any limit that denied. Routes have one to three limits of any algorithms, bursts of
// requests come at one instant, and costs vary. The conformance suite's
// EffectiveWindow checks the stores' windows against the worst traffic;
// this checks what reaches the client.
func TestRateLimitPromise(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 123_000_000, time.UTC)
	stores := []struct {
		name string
		new  func(t *testing.T, now *time.Time) (ratelimit.Store, func(time.Duration))
	}{
		{"memory", func(t *testing.T, now *time.Time) (ratelimit.Store, func(time.Duration)) {
			m, err := store.NewMemory(store.MemoryOptions{Clock: func() time.Time { return *now }})
			if err != nil {
				t.Fatal(err)
			}
			return m, func(d time.Duration) { *now = now.Add(d) }
		}},
		{"redis", func(t *testing.T, now *time.Time) (ratelimit.Store, func(time.Duration)) {
			mini := miniredis.RunT(t)
			mini.SetTime(*now)
			c := redis.NewClient(&redis.Options{Addr: mini.Addr()})
			t.Cleanup(func() { c.Close() })
			// The deny cache counts time on the wall clock, which stands
			// still here while Redis's jumps; its own tests pin it.
			s, err := store.NewRedis(c, store.RedisOptions{DenyCacheSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			return s, func(d time.Duration) {
				*now = now.Add(d)
				mini.SetTime(*now)
				mini.FastForward(d)
			}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			h := fnv.New64a()
			h.Write([]byte(t.Name()))
			rng := rand.New(rand.NewPCG(h.Sum64(), 7))
			checked := 0
			for round := range 24 {
				now := start
				s, advance := st.new(t, &now)
				limits := randomPromiseLimits(rng)
				most := 1 << 30
				for _, l := range limits {
					most = min(most, capacityOf(l))
				}
				lim := newLimiter(t, s, "promise", ratelimit.WithLimits(limits...), ratelimit.WithCost(func(r ratelimit.Request) int {
					n, _ := strconv.Atoi(r.(*http.Request).Header.Get("X-Cost"))
					return n
				}))
				hd := lim.Handler(http.HandlerFunc(adaptertest.OK))
				// promises[client][policy] are what the answers said so far.
				type promise struct {
					at, until time.Time
					r, left   int64
				}
				promises := map[string]map[string][]promise{}
				for step := range 160 {
					switch n := rng.IntN(10); {
					case n < 5:
					case n < 8:
						advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
					default:
						advance(time.Duration(rng.Int64N(int64(12 * time.Second))).Truncate(time.Microsecond))
					}
					client := []string{"192.0.2.1:1", "192.0.2.2:1"}[rng.IntN(2)]
					cost := 1
					if rng.IntN(4) == 0 {
						cost = 1 + rng.IntN(most)
					}
					w := serve(hd, "GET", "/", func(r *http.Request) {
						r.RemoteAddr = client
						r.Header.Set("X-Cost", strconv.Itoa(cost))
					})
					if w.Code != 200 && w.Code != 429 {
						t.Fatalf("round %d step %d: status %d", round, step, w.Code)
					}
					items := mustParse(t, w.Header())
					retryAfter := int64(-1)
					if w.Code == 429 {
						var err error
						if retryAfter, err = strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64); err != nil || retryAfter < 1 {
							t.Fatalf("round %d step %d: 429 with Retry-After %q", round, step, w.Header().Get("Retry-After"))
						}
					}
					if promises[client] == nil {
						promises[client] = map[string][]promise{}
					}
					for _, it := range items {
						r, tt := it.params["r"].(int64), it.params["t"].(int64)
						if r < 0 || tt < 0 {
							t.Fatalf("round %d step %d: %s: r=%d t=%d", round, step, it.name, r, tt)
						}
						// A limit that denied (r below the cost) is bound by
						// Retry-After; one that admitted keeps its own t.
						if retryAfter >= 0 && r < int64(cost) && tt > retryAfter {
							t.Fatalf("round %d step %d: %v: %s denied and says t=%d, later than Retry-After %d", round, step, limits, it.name, tt, retryAfter)
						}
						if w.Code == 200 {
							for i := range promises[client][it.name] {
								p := &promises[client][it.name][i]
								if now.Before(p.until) {
									if p.left -= int64(cost); p.left < 0 {
										t.Fatalf("round %d step %d: %v: the answer at +%v said %s r=%d t=%v; by +%v more than %d units passed",
											round, step, limits, p.at.Sub(start), it.name, p.r, p.until.Sub(p.at), now.Sub(start), p.r)
									}
								}
							}
						}
						promises[client][it.name] = append(promises[client][it.name], promise{at: now, until: now.Add(time.Duration(max(tt-1, 0)) * time.Second), r: r, left: r})
						checked++
					}
				}
			}
			t.Logf("%d promises checked", checked)
		})
	}
}

// randomPromiseLimits returns one to three limits that can share a route,
// of any algorithms, windows of whole seconds.
func randomPromiseLimits(rng *rand.Rand) []ratelimit.Limit {
	windows := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}
	var limits []ratelimit.Limit
	for n := 1 + rng.IntN(3); len(limits) < n; {
		l := ratelimit.Limit{Quota: 1 + rng.IntN(8), Window: windows[rng.IntN(len(windows))]}.Using(ratelimit.Algorithm(rng.IntN(4)))
		switch l.Algorithm {
		case ratelimit.SlidingWindow:
			l.Precision = l.Window / time.Duration([]int{1, 2, 5, 10}[rng.IntN(4)])
		case ratelimit.TokenBucket:
			if rng.IntN(2) == 0 {
				l.Burst = 1 + rng.IntN(10)
			}
		}
		if _, err := ratelimit.NewLimits(append(limits, l)...); err == nil {
			limits = append(limits, l)
		}
	}
	return limits
}

// capacityOf is the most units l holds.
func capacityOf(l ratelimit.Limit) int {
	if l.Algorithm == ratelimit.TokenBucket && l.Burst > 0 {
		return l.Burst
	}
	return l.Quota
}
