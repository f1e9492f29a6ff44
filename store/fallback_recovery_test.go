package store

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
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

// chargeTrips counts, through a go-redis hook, the round trips that bring
// backlogs to Redis and the charges they carry.
type chargeTrips struct {
	trips, charges atomic.Int64
}

func (c *chargeTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *chargeTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isCharge(cmd) {
			c.trips.Add(1)
			c.charges.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *chargeTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if isCharge(cmd) {
				n++
			}
		}
		if n > 0 {
			c.trips.Add(1)
			c.charges.Add(int64(n))
		}
		return next(ctx, cmds)
	}
}

// isCharge reports whether cmd runs the charge program.
func isCharge(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	target, _ := args[1].(string)
	return target == chargeProgram.function || target == chargeProgram.script.Hash() || target == chargeProgram.source
}

// TestFaultRecoveryUnderLoad: Redis hangs (SIGSTOP) while a flood of
// fresh keys comes, until the Fallback holds MaxBacklog keys waiting for
// Redis; then Redis goes on and the flood with it. Every waiting key must
// go back to Redis, many keys a round trip, while the flood keeps Redis
// busy, and Redis must hold each one's admission.
func TestFaultRecoveryUnderLoad(t *testing.T) {
	redistest.RequireFaults(t)
	const waiting = 40_000
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	trips := &chargeTrips{}
	client.AddHook(trips)
	f, err := NewFallback(newStore(t, client, RedisOptions{}), FallbackOptions{Budget: 100 * time.Millisecond, ProbeInterval: 50 * time.Millisecond, MaxBacklog: waiting, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	limits := limitsOf(t, ratelimit.Limit{Quota: 100, Window: time.Hour}.Using(ratelimit.FixedWindow))
	ctx := context.Background()

	const workers = 8
	var fresh, decided, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.Allow(ctx, "flood-"+strconv.FormatInt(fresh.Add(1), 36), 1, limits); err != nil {
					failed.Add(1)
				}
				decided.Add(1)
			}
		})
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(stop)
			wg.Wait()
		})
	}
	defer end()

	time.Sleep(200 * time.Millisecond) // the flood on Redis
	srv.Pause()
	paused := time.Now()
	for f.Health().Waiting < waiting {
		if time.Since(paused) > time.Minute {
			srv.Resume()
			t.Fatalf("after a minute of Redis hung, %d keys wait, want %d", f.Health().Waiting, waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := f.Health()
	decidedAt := decided.Load()
	srv.Resume()
	resumed := time.Now()
	var back time.Duration
	for h := f.Health(); h.Waiting > 0 || h.Decisions != "redis"; h = f.Health() {
		if back == 0 && h.Decisions == "redis" {
			back = time.Since(resumed)
		}
		if time.Since(resumed) > 2*time.Minute {
			t.Fatalf("2 minutes after Redis went on, %+v", h)
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(resumed)
	after := f.Health()
	end()
	flood := decided.Load() - decidedAt
	handed := after.Reconciled - before.Reconciled
	t.Logf("%d keys waited after %v of Redis hung; decisions back on Redis %v after it went on, every key %v after (%.0f keys/s), while the flood made %d decisions (%.0f/s); %d charges in %d round trips (%.1f a round trip); %d calls failed",
		before.Waiting, resumed.Sub(paused).Round(time.Millisecond), back.Round(time.Millisecond), took.Round(time.Millisecond), float64(handed)/took.Seconds(),
		flood, float64(flood)/took.Seconds(), trips.charges.Load(), trips.trips.Load(), float64(trips.charges.Load())/float64(max(1, trips.trips.Load())), failed.Load())
	if int64(handed) < before.Waiting {
		t.Errorf("%d keys handed back, want the %d that waited", handed, before.Waiting)
	}
	if n, k := trips.charges.Load(), trips.trips.Load(); n < 10*k {
		t.Errorf("%d charges in %d round trips: want at least 10 a round trip", n, k)
	}
	if failed.Load() > 0 {
		t.Errorf("%d calls failed, want none: the Fallback decides them", failed.Load())
	}

	// Each waiting key was admitted once, in process; Redis must hold that
	// admission, once. The keys flooded in while Redis hung are the ones
	// that waited, but for those past MaxBacklog, which Redis never hears
	// of; so every key Redis holds once is counted, and none may hold more,
	// but for one per flooding goroutine: a decision Redis made as it hung,
	// whose answer came after the budget, was made in process as well.
	var single, more int64
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, "rl:{flood-*}:f*", 1000).Result() // not the charges' identities
		if err != nil {
			t.Fatal(err)
		}
		pipe := client.Pipeline()
		gets := make([]*redis.StringCmd, len(keys))
		for i, k := range keys {
			gets[i] = pipe.Get(ctx, k)
		}
		pipe.Exec(ctx)
		for i, get := range gets {
			n, err := get.Int64()
			switch {
			case err != nil:
				t.Fatalf("GET %s: %v", keys[i], err)
			case n == 1:
				single++
			default:
				more++
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	// On a busy machine a call after the recovery may overrun the budget
	// and start another outage: each may add as much.
	outages := int64(max(f.Health().Outages, 1))
	t.Logf("Redis holds %d flood keys once, %d more than once; %d outages", single, more, outages)
	if more > workers*outages || single < before.Waiting-workers*outages {
		t.Errorf("Redis holds %d flood keys once and %d more than once; want at most %d more than once (%d per outage), and at least the %d that waited", single, more, workers*outages, workers, before.Waiting)
	}
}
