package store

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/redistest"
)

// TestFaultAnswersPingButCannotDecide injects, under load, faults in which
// Redis answers PING but refuses or holds every decision: writes paused,
// the server turned into a read-only replica, and out of memory with
// noeviction. For each: no request fails, decisions move to memory once
// and back once, and they are back on Redis by the first or second probe
// after the fault ends.
func TestFaultAnswersPingButCannotDecide(t *testing.T) {
	redistest.RequireFaults(t)
	const length = 1500 * time.Millisecond
	admin := func(t *testing.T, r *faultRig, args ...any) {
		t.Helper()
		c := redis.NewClient(&redis.Options{Addr: r.srv.Addr})
		defer c.Close()
		if err := c.Do(context.Background(), args...).Err(); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, tt := range []struct {
		name  string
		start func(t *testing.T, r *faultRig)
		end   func(t *testing.T, r *faultRig) // nil: the fault ends by itself after length
	}{
		{"CLIENT PAUSE WRITE", func(t *testing.T, r *faultRig) {
			admin(t, r, "CLIENT", "PAUSE", length.Milliseconds(), "WRITE")
		}, nil},
		{"read-only replica", func(t *testing.T, r *faultRig) {
			master := redistest.Require(t)
			host, port := "127.0.0.1", master.Addr[len("127.0.0.1:"):]
			admin(t, r, "REPLICAOF", host, port)
		}, func(t *testing.T, r *faultRig) {
			admin(t, r, "REPLICAOF", "NO", "ONE")
		}},
		{"out of memory, noeviction", func(t *testing.T, r *faultRig) {
			admin(t, r, "CONFIG", "SET", "maxmemory-policy", "noeviction")
			admin(t, r, "CONFIG", "SET", "maxmemory", "1")
		}, func(t *testing.T, r *faultRig) {
			admin(t, r, "CONFIG", "SET", "maxmemory", "0")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newFaultRigWith(t, redis.Options{}, true, steadyBudget, lots())
			var ended time.Time
			out := r.during(t, 3500*time.Millisecond, time.Second, func() {
				tt.start(t, r)
				time.Sleep(length)
				if tt.end != nil {
					tt.end(t, r)
				}
				ended = time.Now()
			})
			for _, o := range out {
				if o.status != 200 {
					t.Fatalf("a request at +%v of the fault's end got status %d", o.start.Sub(ended), o.status)
				}
			}
			ups, at := r.health.get()
			var back time.Duration
			if len(ups) == 2 {
				back = at[1].Sub(ended)
			}
			t.Logf("%s for %v: %d requests, none failed; %d decided in process; health changes %v; back on Redis %v after the fault ended",
				tt.name, length, len(out), r.fallback.Health().Local, ups, back)
			if len(ups) != 2 || ups[0] || !ups[1] {
				t.Fatalf("health changes %v, want one down and one up: %v (the fault ended at +%v)", ups, &r.health, ended.Sub(at[0]).Round(time.Millisecond))
			}
			r.health.checkBack(t, tt.name, ended)
		})
	}
}
