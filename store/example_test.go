package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

func ExampleNewRedis() {
	srv, _ := miniredis.Run() // an embedded Redis; use your own address in production
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()

	s, err := store.NewRedis(client, store.RedisOptions{Prefix: "myapp:"})
	if err != nil {
		panic(err)
	}
	// 10 per minute and 100 per day, decided together. Build the set
	// once and reuse it.
	limits, err := ratelimit.NewLimits(
		ratelimit.PerMinute(10).Using(ratelimit.TokenBucket),
		ratelimit.Limit{Quota: 100, Window: 24 * time.Hour}.Using(ratelimit.FixedWindow),
	)
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := s.Allow(context.Background(), "user:42", 4, limits)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Results()[0].Remaining, d.Results()[1].Remaining)
	}
	// Output:
	// true 6 96
	// true 2 92
	// false 2 92
}

func ExampleRedis_Reset() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	s, _ := store.NewRedis(client, store.RedisOptions{})

	login, _ := ratelimit.NewLimits(ratelimit.PerMinute(3).Using(ratelimit.SlidingLog))
	ctx := context.Background()
	for range 3 {
		s.Allow(ctx, "alice", 1, login) // failed attempts
	}
	d, _ := s.Allow(ctx, "alice", 1, login)
	fmt.Println("fourth attempt allowed:", d.Allowed)

	s.Reset(ctx, "alice", login) // after a successful login
	d, _ = s.Allow(ctx, "alice", 1, login)
	fmt.Println("after reset allowed:", d.Allowed)
	// Output:
	// fourth attempt allowed: false
	// after reset allowed: true
}

// Peek tells what a request would get, without spending anything: here,
// how many login attempts are left.
func ExampleRedis_Peek() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	s, _ := store.NewRedis(client, store.RedisOptions{})

	login, _ := ratelimit.NewLimits(ratelimit.PerMinute(3).Using(ratelimit.SlidingLog))
	ctx := context.Background()
	s.Allow(ctx, "alice", 1, login)
	s.Allow(ctx, "alice", 1, login)
	for range 2 {
		d, _ := s.Peek(ctx, "alice", 1, login)
		fmt.Println("attempts left:", d.Results()[0].Remaining, "next allowed:", d.Allowed)
	}
	d, _ := s.Allow(ctx, "alice", 1, login)
	fmt.Println("third attempt allowed:", d.Allowed)
	d, _ = s.Peek(ctx, "alice", 1, login)
	fmt.Println("attempts left:", d.Results()[0].Remaining, "next allowed:", d.Allowed)
	// Output:
	// attempts left: 1 next allowed: true
	// attempts left: 1 next allowed: true
	// third attempt allowed: true
	// attempts left: 0 next allowed: false
}

// The configuration to run in production: Redis, and a Fallback that
// decides in process while Redis fails.
func ExampleNewFallback() {
	srv, _ := miniredis.Run()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	shared, err := store.NewRedis(client, store.RedisOptions{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// At start, a misconfigured Redis needs a fix; an unreachable one
	// does not stop the service, which the Fallback serves meanwhile.
	if err := shared.Check(ctx); errors.Is(err, store.ErrMisconfigured) {
		panic(err)
	}
	s, err := store.NewFallback(shared, store.FallbackOptions{
		Instances: 2, // while Redis is down, each of 2 instances allows half
		// The default, 50ms, suits Redis; miniredis, which runs this
		// example, runs one command at a time and compiles each script
		// it runs, so a check can hold a decision past 50ms.
		Budget: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	limits, _ := ratelimit.NewLimits(ratelimit.PerMinute(10).Using(ratelimit.FixedWindow))
	d, _ := s.Allow(ctx, "user:42", 1, limits)
	fmt.Println("on Redis:", d.Allowed, d.Results()[0].Remaining, d.Fallback)

	// Redis goes down. This instance may spend its half of what Redis
	// said was left: 5 of 9.
	srv.Close()
	d, err = s.Allow(ctx, "user:42", 1, limits)
	fmt.Println("Redis down:", d.Allowed, d.Results()[0].Remaining, d.Fallback, err)
	fmt.Println("decisions:", s.Health().Decisions)
	// Output:
	// on Redis: true 9 false
	// Redis down: true 4 true <nil>
	// decisions: in_process
}
