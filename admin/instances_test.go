package admin

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// instanceEnv, when set, makes the test binary an instance of a service
// (see serveInstance): "cluster or server,address,namespace".
const instanceEnv = "RATELIMIT_ADMIN_TEST_INSTANCE"

// serveInstance serves, on a free port it prints, a Limiter on Redis,
// behind a Fallback, of a fixed window of 100 an hour named "p", keyed by
// X-Key as "c:" and its value, with the overrides of a Plane. Besides the
// limited "/", it answers "/quota" with the quota in force for X-Key (a
// Peek), "/read" with whether the Plane has read the overrides, and
// "/set?quota=N" by setting N as X-Key's override, and "/decisions" with
// where its Fallback decides. It runs until killed.
func serveInstance() {
	f := strings.Split(os.Getenv(instanceEnv), ",")
	var c redis.UniversalClient
	if f[0] == "cluster" {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(f[1], " "), PoolSize: 64, ContextTimeoutEnabled: true})
	} else {
		c = redis.NewClient(&redis.Options{Addr: f[1], PoolSize: 64, ContextTimeoutEnabled: true})
	}
	quiet := slog.New(slog.DiscardHandler)
	r, err := store.NewRedis(c, store.RedisOptions{Prefix: "rltest:", Logger: quiet})
	if err != nil {
		panic(err)
	}
	s, err := store.NewFallback(r, store.FallbackOptions{Budget: time.Second, Logger: quiet})
	if err != nil {
		panic(err)
	}
	plane, err := New(r, f[2], Options{Logger: quiet})
	if err != nil {
		panic(err)
	}
	key := func(r ratelimit.Request) (string, error) { return "c:" + r.(*http.Request).Header.Get("X-Key"), nil }
	l, err := ratelimit.New(s, f[2], ratelimit.WithKey(key), ratelimit.WithOverrides(plane), ratelimit.WithLogger(quiet),
		ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100, Window: time.Hour, Name: "p"}))
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.HandleFunc("/quota", func(w http.ResponseWriter, r *http.Request) {
		d, err := l.Peek(r)
		if err != nil || len(d.Results()) != 1 {
			http.Error(w, fmt.Sprint(err), 500)
			return
		}
		fmt.Fprint(w, d.Results()[0].Limit.Quota)
	})
	mux.HandleFunc("/decisions", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, s.Health().Decisions)
	})
	mux.HandleFunc("/read", func(w http.ResponseWriter, r *http.Request) {
		_, read := plane.List()
		fmt.Fprint(w, read)
	})
	mux.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		q, _ := strconv.Atoi(r.URL.Query().Get("quota"))
		if err := plane.Set(r.Context(), Override{Policy: "p", StoredKey: "c:" + r.Header.Get("X-Key"), Quota: q}); err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(ln.Addr().String())
	http.Serve(ln, mux)
}

// instance is a child process serving an instance.
type instance struct{ addr string }

// startInstance starts an instance on Redis (a server's address, or a
// cluster's addresses) serving namespace.
func startInstance(t *testing.T, kind, addrs, namespace string) *instance {
	t.Helper()
	_, addr := testkit.StartChild(t, fmt.Sprintf("%s=%s,%s,%s", instanceEnv, kind, addrs, namespace))
	return &instance{addr: addr}
}

// do sends a request for path with X-Key key to i and returns the status
// and the body.
func (i *instance) do(t *testing.T, client *http.Client, path, key string) (int, string) {
	req, _ := http.NewRequest("GET", "http://"+i.addr+path, nil)
	req.Header.Set("X-Key", key)
	res, err := client.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", path, err)
		return 0, ""
	}
	defer res.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&b)
	return res.StatusCode, b.String()
}

// TestOverridesAcrossInstances: three instances, each a process of its
// own, on one redis-server and on a 3-master cluster. Twenty times, one
// instance sets a key's override; the test measures, from just before
// that instance is asked until each instance answers with the new quota,
// how long every instance took to apply it; then the three instances
// together admit exactly the new quota of that key's requests.
func TestOverridesAcrossInstances(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"server", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			addrs := ""
			if kind == "cluster" {
				addrs = strings.Join(redistest.SharedCluster(t).Addrs(), " ")
			} else {
				addrs = redistest.Shared(t).Addr
			}
			ns := fmt.Sprintf("across-%s-%d", kind, time.Now().UnixNano())
			instances := make([]*instance, 3)
			for i := range instances {
				instances[i] = startInstance(t, kind, addrs, ns)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
			t.Cleanup(client.CloseIdleConnections)
			var took []time.Duration
			for change := range 20 {
				key, quota := fmt.Sprint("k", change), 3+change%5
				start := time.Now()
				if status, body := instances[change%3].do(t, client, "/set?quota="+strconv.Itoa(quota), key); status != 200 {
					t.Fatalf("setting an override: %d %s", status, body)
				}
				took = append(took, appliedEverywhere(t, client, instances, key, quota, start))
				// Each applies it: together they admit the quota, no more.
				var wg sync.WaitGroup
				var admitted atomic.Int64
				for g := range 12 {
					wg.Go(func() {
						for range 3 {
							if status, _ := instances[g%3].do(t, client, "/", key); status == 200 {
								admitted.Add(1)
							}
						}
					})
				}
				wg.Wait()
				if n := admitted.Load(); n != int64(quota) {
					t.Errorf("change %d: the instances admitted %d of 36 requests under a quota of %d", change, n, quota)
				}
			}
			slices.Sort(took)
			t.Logf("20 changes, the time until all 3 instances applied each: median %v, worst %v, best %v",
				took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), took[0].Round(time.Millisecond))
		})
	}
}

// appliedEverywhere waits until every instance answers key's quota with
// quota, up to a minute, and returns how long that took from start.
func appliedEverywhere(t *testing.T, client *http.Client, instances []*instance, key string, quota int, start time.Time) time.Duration {
	t.Helper()
	var wg sync.WaitGroup
	var slowest atomic.Int64
	for _, in := range instances {
		wg.Go(func() {
			for {
				if _, body := in.do(t, client, "/quota", key); body == strconv.Itoa(quota) {
					break
				}
				if time.Since(start) > time.Minute {
					t.Errorf("an instance did not apply the override in a minute")
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			d := int64(time.Since(start))
			for {
				if old := slowest.Load(); d <= old || slowest.CompareAndSwap(old, d) {
					break
				}
			}
		})
	}
	wg.Wait()
	return time.Duration(slowest.Load())
}

// TestOverridesThroughOutageAcrossInstances: three instances, processes
// of their own behind Fallbacks, apply an override; Redis is paused
// (CLIENT PAUSE WRITE holds every script) and each keeps applying it; a
// fourth instance started during the pause has read none, says so, and
// applies none; once Redis answers, a newer override set on one instance
// reaches all four (the time is logged), and together they admit exactly
// its quota.
func TestOverridesThroughOutageAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Require(t)
	ctl := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { ctl.Close() })
	ns := fmt.Sprintf("outage-%d", time.Now().UnixNano())
	instances := make([]*instance, 3)
	for i := range instances {
		instances[i] = startInstance(t, "server", srv.Addr, ns)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	t.Cleanup(client.CloseIdleConnections)
	if status, body := instances[0].do(t, client, "/set?quota=7", "k"); status != 200 {
		t.Fatalf("setting an override: %d %s", status, body)
	}
	appliedEverywhere(t, client, instances, "k", 7, time.Now())
	if err := ctl.Do(ctx, "CLIENT", "PAUSE", 60_000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Do(ctx, "CLIENT", "UNPAUSE") })
	for i, in := range instances {
		if _, body := in.do(t, client, "/quota", "k"); body != "7" {
			t.Errorf("instance %d during the outage: quota %s, want 7, the override it read before", i, body)
		}
	}
	late := startInstance(t, "server", srv.Addr, ns)
	if _, body := late.do(t, client, "/read", "k"); body != "false" {
		t.Errorf("an instance started during the outage says it read the overrides: %s", body)
	}
	if _, body := late.do(t, client, "/quota", "k"); body != "100" {
		t.Errorf("an instance started during the outage: quota %s, want the limit's 100", body)
	}
	if err := ctl.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	all := append(instances, late)
	deadline := time.Now().Add(time.Minute)
	var start time.Time
	for {
		start = time.Now()
		if status, _ := instances[1].do(t, client, "/set?quota=9", "k"); status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no override could be set in a minute after the outage")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("after the outage, all four instances applied the newest override in %v", appliedEverywhere(t, client, all, "k", 9, start).Round(time.Millisecond))
	for i, in := range all { // each Fallback decides on Redis again
		for {
			if _, body := in.do(t, client, "/decisions", "k"); body == "redis" {
				break
			}
			if time.Now().After(deadline.Add(time.Minute)) {
				t.Fatalf("instance %d does not decide on Redis again", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for range 3 {
				if status, _ := all[g%4].do(t, client, "/", "k"); status == 200 {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 9 {
		t.Errorf("after the outage the instances admitted %d of 48 under a quota of 9", n)
	}
}
