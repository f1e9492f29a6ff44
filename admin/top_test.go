package admin

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestTopAcrossInstances: three instances on one redis-server deny a
// skewed stream of keys (Zipf, 5,000 keys, 30,000 requests, a quota of 1
// an hour each, so that all but a key's first request are denied). Once
// each has told the others, any of them lists the top 20 over the last
// minute and the last hour: every key's true count of denials lies within
// its range, the range is at most N/128 wide (N the denials on every
// instance), and the top 10 are the keys denied most in truth.
func TestTopAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Shared(t)
	ns := fmt.Sprintf("top-%d", time.Now().UnixNano())
	planes := make([]*Plane, 3)
	handlers := make([]http.Handler, 3)
	for i := range planes {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		s, err := store.NewRedis(c, store.RedisOptions{Prefix: "rltest:"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(s, ns, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		key := func(r ratelimit.Request) (string, error) { return "c:" + r.(*http.Request).Header.Get("X-Key"), nil }
		l, err := ratelimit.New(s, ns, ratelimit.WithKey(key), ratelimit.WithOverrides(p),
			ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 1, Window: time.Hour, Name: "p"}))
		if err != nil {
			t.Fatal(err)
		}
		planes[i], handlers[i] = p, l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		// A clock that stands still: however long the traffic takes, it
		// falls in the last minute.
		now := time.Now()
		p.top.mu.Lock()
		p.top.now = func() time.Time { return now }
		p.top.mu.Unlock()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.2, 1, 4999)
	truth := map[string]int64{}
	var denied int64
	for range 30_000 {
		k := fmt.Sprint("k", zipf.Uint64())
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", k)
		w := httptest.NewRecorder()
		handlers[rng.IntN(3)].ServeHTTP(w, r)
		if w.Code == http.StatusTooManyRequests {
			truth["c:"+k]++
			denied++
		}
	}
	for _, p := range planes {
		if err := p.publish(ctx); err != nil {
			t.Fatal(err)
		}
	}
	type kv struct {
		k string
		n int64
	}
	var byTruth []kv
	for k, n := range truth {
		byTruth = append(byTruth, kv{k, n})
	}
	slices.SortFunc(byTruth, func(a, b kv) int { return cmp.Compare(b.n, a.n) })
	for _, last := range []time.Duration{time.Minute, time.Hour} {
		top, err := planes[1].Top(ctx, "p", last, 20)
		if err != nil {
			t.Fatal(err)
		}
		if len(top) != 20 {
			t.Fatalf("last %v: %d keys, want 20", last, len(top))
		}
		for i, c := range top {
			if tc := truth[c.Key]; tc < c.Low || tc > c.High {
				t.Errorf("last %v: %s denied %d times, outside [%d, %d]", last, c.Key, tc, c.Low, c.High)
			}
			if c.High-c.Low > denied/sketchCounters {
				t.Errorf("last %v: %s: range [%d, %d] wider than N/k = %d", last, c.Key, c.Low, c.High, denied/sketchCounters)
			}
			if i < 10 && c.Key != byTruth[i].k {
				t.Errorf("last %v: the top %d is %s (%d), in truth %s (%d)", last, i+1, c.Key, c.Denied, byTruth[i].k, byTruth[i].n)
			}
		}
		t.Logf("last %v: N=%d denials, N/k=%d; first %+v, 20th %+v", last, denied, denied/sketchCounters, top[0], top[19])
	}
	if _, err := planes[0].Top(ctx, "p", 2*time.Minute, 20); err == nil {
		t.Error("Top over 2 minutes: no error")
	}
}
