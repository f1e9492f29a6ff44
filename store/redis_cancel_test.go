package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer = testkit.Buffer

// pauseAll stalls every command of srv for d, as a slow Redis would.
func pauseAll(t *testing.T, srv *redistest.Server, d time.Duration) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if err := c.Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestCanceledIsNoStoreError: a client that leaves while its request waits
// for a slow Redis is neither logged as a store error nor counted as one, with the bare Redis
// store and through a Fallback, which stays on Redis.
func TestCanceledIsNoStoreError(t *testing.T) {
	redistest.RequireFaults(t)
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", wrapped), func(t *testing.T) {
			srv := redistest.Require(t)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { client.Close() })
			r := newStore(t, client, RedisOptions{})
			r.batch.maxRuns = 1 // a request waits for the run under way
			var s ratelimit.Store = r
			var f *Fallback
			if wrapped {
				var err error
				f, err = NewFallback(r, FallbackOptions{Budget: 5 * time.Second, Logger: quietLogger})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				s = f
			}
			var logs syncBuffer
			var outcomes sync.Map // outcome to *atomic.Int64
			count := func(_ ratelimit.Request, e ratelimit.Event) {
				n, _ := outcomes.LoadOrStore(e.Outcome, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
			seen := func(outcome string) int64 {
				if n, ok := outcomes.Load(outcome); ok {
					return n.(*atomic.Int64).Load()
				}
				return 0
			}
			l, err := ratelimit.New(s, "cancel", ratelimit.WithLimits(ratelimit.PerMinute(100)), ratelimit.WithObserver(count), ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan struct{}, 1)
			h := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served <- struct{}{}
				io.WriteString(w, "ok")
			})))
			t.Cleanup(h.Close)
			// Warm up: the script is loaded and a connection is open.
			if resp, err := http.Get(h.URL); err != nil {
				t.Fatal(err)
			} else {
				resp.Body.Close()
				<-served
			}

			other := limitsOf(t, ratelimit.PerMinute(100))
			pauseAll(t, srv, 2*time.Second)
			var running sync.WaitGroup
			running.Go(func() { // takes the run slot until the pause ends
				if _, err := r.Allow(context.Background(), "other", 1, other); err != nil {
					t.Error(err)
				}
			})
			defer running.Wait()
			waitFor(t, "the first run to start", func() bool {
				r.batch.mu.Lock()
				defer r.batch.mu.Unlock()
				return r.batch.runs == 1
			})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", h.URL, nil)
			if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the client's request: got %v, want its deadline exceeded", err)
			}
			waitFor(t, "the server to see the request canceled", func() bool { return seen("canceled") == 1 })
			if errs, allowed := seen("store_error"), seen("allowed"); errs != 0 || allowed != 1 {
				t.Errorf("observed %d store errors and %d allowed, want none and only the first request allowed", errs, allowed)
			}
			if got := logs.String(); got != "" {
				t.Errorf("a canceled request was logged: %q", got)
			}
			if f != nil {
				if st := f.Health(); st.Decisions != "redis" || st.Failures != 0 || st.Local != 0 {
					t.Errorf("a canceled request moved the fallback: %+v", st)
				}
			}
		})
	}
}

// TestBatchGivenUpIsNotSent: on a real redis-server stalled by CLIENT
// PAUSE, requests that give up while they wait for a batch never reach
// Redis, though the batch they waited for is sent for a request that
// stayed; the requests that stayed are counted once.
func TestBatchGivenUpIsNotSent(t *testing.T) {
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	s := newStore(t, client, RedisOptions{DenyCacheSize: noDenyCache})
	s.batch.maxRuns = 1
	l := ratelimit.Limit{Quota: 1000, Window: time.Hour}.Using(ratelimit.FixedWindow)
	set := limitsOf(t, l)
	ctx := context.Background()
	if _, err := s.Allow(ctx, "warm", 1, set); err != nil {
		t.Fatal(err)
	}

	pauseAll(t, srv, 700*time.Millisecond)
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := s.Allow(ctx, "sent", 1, set); err != nil { // runs alone, at once
			t.Error(err)
		}
	})
	waitFor(t, "the first run to start", func() bool {
		s.batch.mu.Lock()
		defer s.batch.mu.Unlock()
		return s.batch.runs == 1
	})
	for i := range 10 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := s.Allow(ctx, fmt.Sprintf("waiter-%d", i), 1, set); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a waiter past its deadline: got %v", err)
			}
		})
	}
	wg.Go(func() { // waits for the batch, and stays
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := s.Allow(ctx, "patient", 1, set); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	waitFor(t, "Redis to resume", func() bool {
		n, err := client.Exists(ctx, limitKey(s, "sent", l)).Result()
		return err == nil && n == 1
	})
	for i := range 10 {
		if n, err := client.Exists(ctx, limitKey(s, fmt.Sprintf("waiter-%d", i), l)).Result(); err != nil || n != 0 {
			t.Errorf("waiter-%d gave up before its batch was sent, but Redis counted it (%d, %v)", i, n, err)
		}
	}
	for _, key := range []string{"sent", "patient"} {
		if v, err := client.Get(ctx, limitKey(s, key, l)).Result(); err != nil || v != "1" {
			t.Errorf("%s: count %q, %v; want 1", key, v, err)
		}
	}
}
