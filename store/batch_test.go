package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// batched returns a Redis store over miniredis that runs one script at a
// time, so that concurrent requests wait and go together in batches.
func batched(t *testing.T) (*Redis, *redis.Client, *miniredis.Miniredis, *countingHook) {
	t.Helper()
	m, _ := newMiniredis(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	hook := &countingHook{}
	client.AddHook(hook)
	s := newStore(t, client, RedisOptions{DenyCacheSize: noDenyCache})
	if s.batch == nil {
		t.Fatal("a *redis.Client store does not batch")
	}
	s.batch.maxRuns = 1
	return s, client, m, hook
}

// TestBatchIsolatesRequests sends concurrent requests, some for keys that
// hold a foreign value: those fail, the others are decided exactly, and
// fewer commands than requests reach Redis.
func TestBatchIsolatesRequests(t *testing.T) {
	checkLeaks(t)
	s, client, _, hook := batched(t)
	ctx := context.Background()
	l := ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.FixedWindow)
	two := []ratelimit.Limit{ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.SlidingLog), ratelimit.Limit{Quota: 7, Window: time.Hour}.Using(ratelimit.TokenBucket)}
	client.HSet(ctx, limitKey(s, "bad", l), "x", "y")
	client.Set(ctx, limitKey(s, "bad-two", two[1]), "not a hash", 0)
	one, pair := limitsOf(t, l), limitsOf(t, two...)

	var o outcomes
	var wg sync.WaitGroup
	for g := range 60 {
		key := []string{"good", "bad", "other", "bad-two", "pair"}[g%5]
		wg.Go(func() {
			limits := one
			if key == "bad-two" || key == "pair" {
				limits = pair
			}
			for range 5 {
				d, err := s.Allow(ctx, key, 1, limits)
				o.record(key, d, err)
			}
		})
	}
	wg.Wait()
	passed, failed := o.passed, o.failed
	want := map[string]int{"good": 10, "other": 10, "pair": 5}
	for key, n := range want {
		if passed[key] != n || failed[key] != 0 {
			t.Errorf("key %s: %d passed, %d failed; want %d passed, none failed", key, passed[key], failed[key], n)
		}
	}
	for _, key := range []string{"bad", "bad-two"} {
		if failed[key] != 60 || passed[key] != 0 {
			t.Errorf("key %s holding a foreign value: %d failed, %d passed; want all to fail", key, failed[key], passed[key])
		}
	}
	if hook.n >= 300 {
		t.Errorf("300 requests sent %d commands: nothing was batched", hook.n)
	}
	t.Logf("300 requests, %d script runs", hook.n)
}

// TestBatchWaitersMayGiveUp: a request waiting for its batch returns when
// its context ends, and the others are not held up.
func TestBatchWaitersMayGiveUp(t *testing.T) {
	checkLeaks(t)
	s, _, m, _ := batched(t)
	l := limitsOf(t, ratelimit.Limit{Quota: 1000, Window: time.Hour}.Using(ratelimit.FixedWindow))
	m.Lock() // miniredis stalls: the first run hangs, the rest wait
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := s.Allow(ctx, fmt.Sprintf("k%d", i), 1, l)
			errs <- err
		})
	}
	time.Sleep(300 * time.Millisecond)
	m.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a request past its deadline: got %v, want context.DeadlineExceeded", err)
		}
	}
	// The store still works.
	if d, err := s.Allow(context.Background(), "after", 1, l); err != nil || !d.Allowed {
		t.Errorf("after the stall: got %+v, %v", d, err)
	}
}

// TestBatchServerGone: every request of a batch gets the error of a run
// that fails.
func TestBatchServerGone(t *testing.T) {
	checkLeaks(t)
	s, _, m, _ := batched(t)
	m.Close()
	l := limitsOf(t, ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.FixedWindow))
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for i := range 20 {
		wg.Go(func() {
			_, err := s.Allow(context.Background(), fmt.Sprintf("k%d", i), 1, l)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures++
			}
		})
	}
	wg.Wait()
	if failures != 20 {
		t.Errorf("%d of 20 requests failed with the server gone, want 20", failures)
	}
}

// TestBatchBadKeyHarmsNoNeighbour batches requests for keys holding every
// byte, among them keys with newlines that hold a foreign value, on a real
// redis-server: only the requests of the foreign keys fail, with errors
// that are not outages, and through a Fallback Redis stays in use.
func TestBatchBadKeyHarmsNoNeighbour(t *testing.T) {
	srv := redistest.Shared(t)
	checkLeaks(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	r := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache})
	r.batch.maxRuns = 1 // one run at a time: the others wait and go together
	f, err := NewFallback(r, FallbackOptions{Budget: 5 * time.Second, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ctx := context.Background()
	// The sliding window's error names the key.
	l := ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.SlidingWindow)
	set := limitsOf(t, l)
	bad := []string{"bad\nkey", "\n", "bad\r\n\nE x\n"}
	for _, key := range bad {
		client.HSet(ctx, limitKey(r, key, l), "x", "y\nz")
	}
	good := []string{"good", "new\nline", "\x00\xff", "E 1 2 3", "tab\tkey"}

	var o outcomes
	var wg sync.WaitGroup
	for g := range 48 {
		key := append(good, bad...)[g%(len(good)+len(bad))]
		wg.Go(func() {
			for range 4 {
				d, err := f.Allow(ctx, key, 1, set)
				o.record(key, d, err)
			}
		})
	}
	wg.Wait()
	passed, failed := o.passed, o.failed
	for _, key := range good {
		if passed[key] != 10 || failed[key] != 0 {
			t.Errorf("key %q: %d passed, %d failed; want 10 passed, none failed", key, passed[key], failed[key])
		}
	}
	for _, key := range bad {
		if failed[key] == 0 || passed[key] != 0 {
			t.Errorf("key %q holding a foreign value: %d failed, %d passed; want all to fail", key, failed[key], passed[key])
		}
	}
	if st := f.Health(); st.Decisions != "redis" || st.Failures != 0 || st.Local != 0 {
		t.Errorf("a foreign key is not an outage: %+v", st)
	}
}

// outcomes counts, per key, the requests admitted and those that failed.
type outcomes struct {
	mu             sync.Mutex
	passed, failed map[string]int
}

func (o *outcomes) record(key string, d ratelimit.Decision, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.passed == nil {
		o.passed, o.failed = map[string]int{}, map[string]int{}
	}
	if err != nil {
		o.failed[key]++
	} else if d.Allowed {
		o.passed[key]++
	}
}
