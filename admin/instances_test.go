package admin

import (
	"bufio"
	"fmt"
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
	"github.com/ratelimit-go/ratelimit/redistest"
	"github.com/ratelimit-go/ratelimit/store"
)

// instanceEnv, when set, makes the test binary an instance of a service
// (see serveInstance): "cluster or server,address,namespace".
const instanceEnv = "RATELIMIT_ADMIN_TEST_INSTANCE"

// serveInstance serves, on a free port it prints, a Limiter on Redis of
// a fixed window of 100 an hour named "p", keyed by X-Key as "c:" and
// its value, with the overrides of a Plane. Besides the limited "/", it
// answers "/quota" with the quota in force for X-Key (a Peek), and
// "/set?quota=N" by setting N as X-Key's override. It runs until killed.
func serveInstance() {
	f := strings.Split(os.Getenv(instanceEnv), ",")
	var c redis.UniversalClient
	if f[0] == "cluster" {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(f[1], " "), PoolSize: 64})
	} else {
		c = redis.NewClient(&redis.Options{Addr: f[1], PoolSize: 64})
	}
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: "rltest:"})
	if err != nil {
		panic(err)
	}
	plane, err := New(c, f[2], Options{Prefix: "rltest:"})
	if err != nil {
		panic(err)
	}
	key := func(r *http.Request) (string, error) { return "c:" + r.Header.Get("X-Key"), nil }
	l, err := ratelimit.New(s, f[2], ratelimit.WithKey(key), ratelimit.WithOverrides(plane),
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
	mux.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		q, _ := strconv.Atoi(r.URL.Query().Get("quota"))
		if err := plane.Set(r.Context(), Override{Policy: "p", Key: "c:" + r.Header.Get("X-Key"), Quota: q}); err != nil {
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
				took = append(took, time.Duration(slowest.Load()))
				// Each applies it: together they admit the quota, no more.
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
