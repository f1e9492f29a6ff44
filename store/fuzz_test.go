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
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
	"github.com/ratelimit-go/ratelimit/testkits/storetest"
)

// fuzzRig is one pinned miniredis with a Redis store and a Memory store
// on its clock, shared by a fuzzing process's runs. Each run uses its own
// key, so that a failing input fails alone too.
type fuzzRig struct {
	m      *miniredis.Miniredis
	clock  *fakeClock
	redis  *Redis
	memory *memory.Store
	runs   int
}

var theFuzzRig = sync.OnceValue(func() *fuzzRig {
	r := &fuzzRig{}
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	m.SetTime(epoch)
	m.ClockTTL(true)
	r.m, r.clock = m, testkit.NewClock(epoch, m.SetTime)
	r.redis, _ = NewRedis(redis.NewClient(&redis.Options{Addr: m.Addr()}), RedisOptions{DenyCacheSize: noDenyCache})
	r.memory, _ = memory.New(memory.Options{Clock: r.clock.Now})
	return r
})

// FuzzDecide decides arbitrary limits and costs, with the clock moving, on
// the Redis store over miniredis and on the Memory store. Neither may
// panic; limits that cannot work must be refused as ErrInvalid by
// ratelimit.NewLimits, and a cost that cannot pass by both stores (in
// Allow and in Peek); every decision must keep the invariants of
// storetest.CheckDecision; and the two stores must agree, on a Peek before
// each decision too. Half the algorithm bytes (those whose tenth is odd)
// add a ban to the limit: 1 to 4 denials within a window ban for half a
// window, doubling up to two windows.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0), 10, int64(1000), 0, int64(0), 1, []byte{0, 3, 200, 1})
	f.Add(uint8(1), 2, int64(3000), 0, int64(0), 1, []byte{0, 0, 0, 255, 255})
	f.Add(uint8(2), 5, int64(60_000), 0, int64(0), 3, []byte{10, 20, 30})
	f.Add(uint8(3), 7, int64(1000), 20, int64(0), 6, []byte{1, 1, 1, 1, 250})
	f.Add(uint8(0), 10, int64(1000), 0, int64(100), 11, []byte{})
	f.Add(uint8(3), 1, int64(86_400_000), 1<<40, int64(0), -1, []byte{0})
	f.Add(uint8(7), 0, int64(-5), -1, int64(7), 0, []byte{9})
	f.Add(uint8(12), 2, int64(1000), 0, int64(0), 1, []byte{1, 1, 1, 1, 1, 1, 1, 1, 40, 1, 1, 1, 1, 130, 1, 1, 1}) // sliding log, banned after 1 denial
	f.Add(uint8(33), 3, int64(2000), 0, int64(0), 2, []byte{0, 0, 0, 0, 0, 0, 70, 0, 0, 0, 0, 200, 0, 0, 0})       // token bucket, banned after 2
	f.Fuzz(func(t *testing.T, algorithm uint8, quota int, windowMS int64, burst int, precisionMS int64, cost int, steps []byte) {
		rig := theFuzzRig()
		rig.runs++
		key := fmt.Sprintf("fuzz-%d", rig.runs)
		a := ratelimit.Algorithm(algorithm % 5)
		if a == 4 {
			a = 200 // an unknown algorithm
		}
		l := ratelimit.Limit{
			Algorithm: a,
			Quota:     quota,
			Window:    time.Duration(windowMS) * time.Millisecond,
			Burst:     burst,
			Precision: time.Duration(precisionMS) * time.Millisecond,
		}
		ctx := context.Background()
		limits, err := ratelimit.NewLimits(l)
		if err != nil {
			if !errors.Is(err, ratelimit.ErrInvalid) {
				t.Fatalf("NewLimits(%+v): got %v, want ErrInvalid", l, err)
			}
			return
		}
		if algorithm/10%2 == 1 {
			half := max(l.Window/2, time.Millisecond).Truncate(time.Millisecond)
			ban := ratelimit.Ban{After: 1 + int(algorithm/20%4), Within: l.Window, For: half, Max: 4 * half}
			banned, err := limits.WithBan(ban)
			if err != nil && !errors.Is(err, ratelimit.ErrInvalid) {
				t.Fatalf("WithBan(%+v): got %v, want ErrInvalid", ban, err)
			}
			if err == nil {
				limits = banned
			}
		}
		if cost < 1 || cost > capacity(l) {
			for _, s := range []ratelimit.Store{rig.redis, rig.memory} {
				if _, err := s.Allow(ctx, key, cost, limits); !errors.Is(err, ratelimit.ErrInvalid) {
					t.Fatalf("%T: invalid input %+v cost %d: got %v, want ErrInvalid", s, l, cost, err)
				}
				if _, err := s.Peek(ctx, key, cost, limits); !errors.Is(err, ratelimit.ErrInvalid) {
					t.Fatalf("%T: Peek of invalid input %+v cost %d: got %v, want ErrInvalid", s, l, cost, err)
				}
			}
			return
		}
		if len(steps) > 64 {
			steps = steps[:64]
		}
		for i, step := range append([]byte{0}, steps...) {
			// Whole microseconds: the resolution of Redis's TIME, and of
			// both stores' clocks.
			rig.clock.Advance((l.Window / 128 * time.Duration(step)).Truncate(time.Microsecond))
			peeked, err := rig.redis.Peek(ctx, key, cost, limits)
			if err != nil {
				t.Fatalf("step %d: Redis: Peek: %v", i, err)
			}
			if again, err := rig.memory.Peek(ctx, key, cost, limits); err != nil || fmt.Sprint(again) != fmt.Sprint(peeked) {
				t.Fatalf("step %d: %v Peek cost %d:\nredis  %+v\nmemory %+v, %v", i, l, cost, peeked, again, err)
			}
			got, err := rig.redis.Allow(ctx, key, cost, limits)
			if err != nil {
				t.Fatalf("step %d: Redis: %v", i, err)
			}
			if err := storetest.CheckDecision(got, cost, []ratelimit.Limit{l}); err != nil {
				t.Fatalf("step %d: Redis: %+v: %v", i, got, err)
			}
			want, err := rig.memory.Allow(ctx, key, cost, limits)
			if err != nil {
				t.Fatalf("step %d: Memory: %v", i, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d: %v cost %d:\nredis  %+v\nmemory %+v", i, l, cost, got, want)
			}
		}
	})
}
