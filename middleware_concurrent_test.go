package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// instanceEnv, when set, makes the test binary an instance of a service
// (see serveInstance): "redis address,key prefix,slots,slot".
const instanceEnv = "RATELIMIT_TEST_INSTANCE"

// inFlight counts, in Redis, the requests the instances' handlers are
// serving, and keeps the most seen at once: the handlers' own count,
// which knows nothing of the Limiter.
var inFlight = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], n)
end
return n`)

// serveInstance serves, on a free port it prints, a Limiter of a
// Concurrent limit on Redis, keyed by X-API-Key, in front of a handler
// that holds each request for its hold_ms and counts itself in flight.
// It runs until killed.
func serveInstance() {
	f := strings.Split(os.Getenv(instanceEnv), ",")
	slots, _ := strconv.Atoi(f[2])
	slot, _ := time.ParseDuration(f[3])
	c := redis.NewClient(&redis.Options{Addr: f[0], PoolSize: 64})
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: f[1]})
	if err != nil {
		panic(err)
	}
	key, _ := ratelimit.HeaderKey("X-API-Key", []byte("a test secret, 32 bytes at least"))
	l, err := ratelimit.New(s, "gen", ratelimit.WithKey(key),
		ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: slots, Window: slot, Name: "gen-concurrent"}))
	if err != nil {
		panic(err)
	}
	counter, most := f[1]+"in-flight", f[1]+"most"
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.Background()
		inFlight.Run(ctx, c, []string{counter, most})
		defer c.Decr(ctx, counter)
		hold, _ := strconv.Atoi(r.URL.Query().Get("hold_ms"))
		time.Sleep(time.Duration(hold) * time.Millisecond)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(ln.Addr().String())
	http.Serve(ln, h)
}

// instance is a child process serving an instance.
type instance struct {
	cmd  *exec.Cmd
	addr string
}

// startInstance starts an instance on the redis-server at addr, under
// prefix, with a limit of slots requests in flight and slots of slot.
func startInstance(t *testing.T, addr, prefix string, slots int, slot time.Duration) *instance {
	t.Helper()
	cmd, addr := testkit.StartChild(t, fmt.Sprintf("%s=%s,%s,%d,%s", instanceEnv, addr, prefix, slots, slot))
	return &instance{cmd: cmd, addr: addr}
}

// get asks i for /?hold_ms=hold with API key k and returns the status.
func (i *instance) get(t *testing.T, client *http.Client, k string, hold int) int {
	req, _ := http.NewRequest("GET", "http://"+i.addr+"/?hold_ms="+strconv.Itoa(hold), nil)
	req.Header.Set("X-API-Key", k)
	res, err := client.Do(req)
	if err != nil {
		t.Errorf("GET: %v", err)
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// TestConcurrentAcrossInstances: 64 clients spread over 3 instances,
// each a process of its own, on one redis-server, under a limit of 4
// requests in flight per API key. The handlers count themselves in flight
// in Redis: they never see more than 4 at once, and they do see 4.
func TestConcurrentAcrossInstances(t *testing.T) {
	srv := redistest.Require(t)
	const slots, clients = 4, 64
	instances := make([]*instance, 3)
	for i := range instances {
		// Slots of 10s, renewed every 3.3s while their requests run: a
		// loaded machine that starves an instance for a second must not
		// let a slot lapse under a request still in flight (the lapse of
		// slots is TestConcurrentSlotsOfAKilledInstance's).
		instances[i] = startInstance(t, srv.Addr, "across:", slots, 10*time.Second)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var ok, denied atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for g := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for time.Now().Before(deadline) {
				switch instances[g%len(instances)].get(t, client, "k1", rng.IntN(20)) {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					denied.Add(1)
				default:
					t.Errorf("a response was neither 200 nor 429")
					return
				}
			}
		})
	}
	wg.Wait()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	most, _ := rc.Get(context.Background(), "across:most").Int()
	t.Logf("%d served, %d denied; at most %d in flight at once (limit %d)", ok.Load(), denied.Load(), most, slots)
	if most > slots {
		t.Errorf("the handlers saw %d requests in flight at once, more than the limit %d", most, slots)
	}
	if most < slots || denied.Load() == 0 {
		t.Errorf("at most %d in flight, %d denied: the traffic never reached the limit", most, denied.Load())
	}
}

// TestConcurrentSlotsOfAKilledInstance: an instance holds every slot with
// long requests and is killed with SIGKILL; another instance gets slots
// again within a slot (1s here; the bound is the limit's Window) of the
// kill, and not before the slots could have ended.
func TestConcurrentSlotsOfAKilledInstance(t *testing.T) {
	redistest.RequireFaults(t)
	srv := redistest.Require(t)
	const slots, slot = 4, time.Second
	a := startInstance(t, srv.Addr, "killed:", slots, slot)
	b := startInstance(t, srv.Addr, "killed:", slots, slot)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for range slots {
		go func() { // ends with the kill, in an error
			req, _ := http.NewRequest("GET", "http://"+a.addr+"/?hold_ms=60000", nil)
			req.Header.Set("X-API-Key", "k1")
			if res, err := client.Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	waitUntil(t, "the first instance's requests to hold every slot", func() bool {
		n, _ := rc.Get(context.Background(), "killed:in-flight").Int()
		return n == slots
	})
	if code := b.get(t, client, "k1", 0); code != http.StatusTooManyRequests {
		t.Fatalf("with every slot held: got %d, want 429", code)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// A renewal the instance sent before it died may still be waiting in
	// Redis's socket. Redis answers a command sent now only after the
	// events it reads with it, so once it has answered every renewal is
	// counted, and the slots end at most a slot later.
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	counted := time.Now()
	var back time.Duration
	for {
		began := time.Now()
		if code := b.get(t, client, "k1", 0); code == http.StatusOK {
			back = time.Since(killed)
			break
		}
		// Denied: it was decided after it began, so a slot was left then.
		// A millisecond or two between Redis's clock and ours.
		if late := began.Sub(counted); late > slot+2*time.Millisecond {
			t.Errorf("a request sent %v after Redis had every renewal of the killed instance was denied, later than the slot %v", late, slot)
		}
		if time.Since(killed) > 5*slot {
			t.Fatalf("no slot came back %v after the kill; the bound is the slot, %v", time.Since(killed), slot)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("slots back %v after the kill (slot %v, renewed every %v)", back.Round(time.Millisecond), slot, slot/3)
}

// TestConcurrentLongResponseKeepsItsSlot: a request held for 3.5 slots
// keeps the only slot all along (its instance renews the slot), and
// gives it back when it ends.
func TestConcurrentLongResponseKeepsItsSlot(t *testing.T) {
	redistest.RequireFaults(t) // seconds of waiting
	t.Parallel()
	c, prefix := sharedRedis(t)
	const slot = time.Second
	l := newLimiter(t, newRedisStore(t, c, prefix), "long", ratelimit.WithKey(func(ratelimit.Request) (string, error) { return "k", nil }),
		ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 1, Window: slot}))
	release := make(chan struct{})
	started := make(chan struct{})
	long := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	}))
	srv := httptest.NewServer(long)
	defer srv.Close()
	done := make(chan int)
	go func() {
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	<-started
	short := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	start := time.Now()
	tries := 0
	for time.Since(start) < 3*slot+slot/2 {
		if w := serve(short, "GET", "/"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("%v into a response of 3.5 slots: got %d, want 429: the long response lost its slot", time.Since(start), w.Code)
		}
		tries++
		time.Sleep(50 * time.Millisecond)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the long response: got %d", code)
	}
	if w := serve(short, "GET", "/"); w.Code != http.StatusOK {
		t.Fatalf("after the long response: got %d, want 200", w.Code)
	}
	t.Logf("%d requests denied over %v while the long response held the slot", tries, time.Since(start).Round(time.Millisecond))
}
