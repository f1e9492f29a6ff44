package grpclimit_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestFallbackWhileRedisPaused: with a Redis store behind a Fallback, on
// a real redis-server whose writes are paused (CLIENT PAUSE WRITE holds
// every script), calls are still decided, in process: admitted up to the
// limit, then ResourceExhausted, unary and streaming alike.
func TestFallbackWhileRedisPaused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Require(t)
	ctl := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { ctl.Close() })
	quietLog := slog.New(slog.DiscardHandler)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	shared, err := store.NewRedis(c, store.RedisOptions{Prefix: "grpclimit:", Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	f, err := store.NewFallback(shared, store.FallbackOptions{Budget: 100 * time.Millisecond, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l := newLimiterOn(t, f, ratelimit.WithLimits(ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("api")))
	r := newRig(t, nil, l)
	r.svc.started = make(chan []ratelimit.Decision, 1)

	if err := ctl.Do(ctx, "CLIENT", "PAUSE", 60_000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Do(ctx, "CLIENT", "UNPAUSE") })
	for i, tt := range []struct {
		kind string
		want codes.Code
	}{{unary, codes.OK}, {stream, codes.OK}, {unary, codes.OK}, {stream, codes.ResourceExhausted}, {unary, codes.ResourceExhausted}} {
		md, err := r.call(ctx, tt.kind)
		if got := refusalOf(err).code; got != tt.want {
			t.Fatalf("call %d (%s) while Redis is paused: got %v (%v), want %v", i, tt.kind, got, err, tt.want)
		}
		if len(md.Get("ratelimit")) != 1 {
			t.Errorf("call %d (%s): ratelimit %q, want the Fallback's decision's", i, tt.kind, md.Get("ratelimit"))
		}
		if tt.want == codes.OK {
			if ds := <-r.svc.started; len(ds) != 1 || !ds[0].Fallback {
				t.Errorf("call %d (%s): the handler saw the decisions %+v, want one made by the fallback", i, tt.kind, ds)
			}
		}
	}
}
