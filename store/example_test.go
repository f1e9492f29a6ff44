package store_test

import (
	"context"
	"fmt"

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

	s, err := store.NewRedis(client, store.WithPrefix("myapp:"))
	if err != nil {
		panic(err)
	}
	// 10 per minute and 100 per day, decided together.
	limits := []ratelimit.Limit{
		ratelimit.PerMinute(10).Using(ratelimit.TokenBucket),
		ratelimit.PerDay(100).Using(ratelimit.FixedWindow),
	}
	for range 3 {
		d, err := s.Allow(context.Background(), "user:42", 4, limits...)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Results[0].Remaining, d.Results[1].Remaining)
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
	s, _ := store.NewRedis(client)

	login := ratelimit.PerMinute(3).Using(ratelimit.SlidingLog)
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
