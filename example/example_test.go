package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var (
	buildOnce sync.Once
	binaries  = map[string]string{} // framework -> path
	buildErr  error
)

// build compiles the three example servers once.
func build(t *testing.T) map[string]string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ratelimit-example-")
		if err != nil {
			buildErr = err
			return
		}
		for name, pkg := range map[string]string{"net/http": ".", "gin": "./gin", "echo": "./echo"} {
			bin := filepath.Join(dir, strings.ReplaceAll(name, "/", "-"))
			out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
			binaries[name] = bin
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binaries
}

// start runs an example server and returns its base URL once it listens.
func start(t *testing.T, bin string, args ...string) string {
	t.Helper()
	u, _ := startWith(t, nil, bin, args...)
	return u
}

// startWith runs an example server with env added to the environment,
// and returns its base URL once it listens, and a func that returns what
// it wrote to stdout and stderr so far.
func startWith(t *testing.T, env []string, bin string, args ...string) (string, func() string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(testEnv(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if _, u, ok := strings.Cut(sc.Text(), "listening on "); ok {
				found <- u
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("%s exited: %s", bin, out.String())
		}
		return u, out.String
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start: %s", bin, out.String())
	}
	return "", nil
}

// testEnv is the environment without the variables that name a Redis,
// or give the secret API keys are hashed with: the command line alone
// picks them, and without -redis, REDIS_URL would replace the embedded one.
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_") && !strings.HasPrefix(kv, "RATELIMIT_KEY_SECRET=") {
			env = append(env, kv)
		}
	}
	return env
}

// lockedBuffer is a buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// send makes a request and returns the response, whose body it has read
// into a buffer (closing it is not needed).
func send(t *testing.T, method, u string, header map[string]string, form url.Values) *http.Response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// frameworks are the example servers, one for each framework it runs
// on, as build names them.
var frameworks = []string{"net/http", "gin", "echo"}

// forEachServer runs test, in parallel subtests, for the example server
// of every framework on every backend, with the server's binary and the
// backend's arguments and client (see backend).
func forEachServer(t *testing.T, test func(t *testing.T, framework, bin string, args []string, client *redis.Client)) {
	bins := build(t)
	for _, framework := range frameworks {
		for _, b := range backends {
			t.Run(framework+"/"+b, func(t *testing.T) {
				t.Parallel()
				args, client := backend(t, b)
				test(t, framework, bins[framework], args, client)
			})
		}
	}
}

// backends are where an example server under test keeps its limits:
// "embedded", a miniredis inside the server, what it runs on without
// -redis; and "redis", a real redis-server behind store.Fallback, the
// production configuration.
var backends = []string{"embedded", "redis"}

// backend returns the arguments that run an example server on b, and for
// "redis" a client of its redis-server, started for t alone; the client is
// nil for "embedded".
func backend(t *testing.T, b string) ([]string, *redis.Client) {
	t.Helper()
	if b == "embedded" {
		return nil, nil
	}
	addr := redistest.Require(t).Addr
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { client.Close() })
	return []string{"-redis", "redis://" + addr + "/0", "-fallback-budget", steadyBudget}, client
}

// steadyBudget is the -fallback-budget of the tests that count decisions
// on a running Redis: it decides, however slow a busy test machine makes
// it. With the default of 50ms a slow answer is decided in the server's
// memory instead, where two servers each admit the limit: the tests count
// on Redis, not on the machine's speed.
const steadyBudget = "10s"

// Patterns of the keys the example's limits keep in Redis, which read
// example:{namespace|scope|client key}suffix: the scope is "*" for the
// limits of WithLimits and the route pattern for those of WithRoutes; an
// API key is an HMAC of the X-API-Key header, 32 hex digits.
const (
	homeKeys  = `example:{ip|\*|ip:*}:*`    // GET /
	loginKeys = `example:{login|\*|ip:*}:*` // POST /login
	apiKeys   = `example:{api|\*|header:X-Api-Key:*}:*`
)

// keys returns the keys of client that match pattern.
func keys(t *testing.T, client *redis.Client, pattern string) []string {
	t.Helper()
	k, err := client.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestTwoServersShareOneLimit starts two example servers on one real
// Redis and sends them concurrent requests: together they admit exactly
// the limit, for every algorithm.
func TestTwoServersShareOneLimit(t *testing.T) {
	bins := build(t)
	for _, algorithm := range []string{"fixed-window", "sliding-log", "sliding-window", "token-bucket"} {
		t.Run(algorithm, func(t *testing.T) {
			t.Parallel()
			redisURL := "redis://" + redistest.Require(t).Addr + "/0"
			args := []string{"-redis", redisURL, "-algorithm", algorithm, "-limit", "10", "-window", "1m", "-fallback-budget", steadyBudget}
			servers := []string{start(t, bins["net/http"], args...), start(t, bins["net/http"], args...)}
			var passed, denied atomic.Int64
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Go(func() {
					switch code := send(t, "GET", servers[i%2]+"/", nil, nil).StatusCode; code {
					case 200:
						passed.Add(1)
					case 429:
						denied.Add(1)
					default:
						t.Errorf("status %d", code)
					}
				})
			}
			wg.Wait()
			if passed.Load() != 10 || denied.Load() != 30 {
				t.Errorf("two servers admitted %d and denied %d of 40, want 10 and 30", passed.Load(), denied.Load())
			}
		})
	}
}

// TestForgedHeadersChangeNothing sends each request with a new forged
// X-Forwarded-For, X-Real-IP and Forwarded from a peer that is not a
// trusted proxy: all count as the peer.
func TestForgedHeadersChangeNothing(t *testing.T) {
	bins := build(t)
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			args, _ := backend(t, b)
			server := start(t, bins["net/http"], append(args, "-limit", "5", "-window", "1m", "-trusted-proxies", "10.0.0.0/8,192.168.0.0/16")...)
			passed := 0
			for i := range 20 {
				forged := fmt.Sprintf("203.0.113.%d", i+1)
				resp := send(t, "GET", server+"/", map[string]string{
					"X-Forwarded-For": forged, "X-Real-IP": forged, "Forwarded": "for=" + forged,
				}, nil)
				if resp.StatusCode == 200 {
					passed++
				}
			}
			if passed != 5 {
				t.Errorf("%d of 20 requests with forged headers passed, want 5", passed)
			}
		})
	}
}

// TestRedisCluster runs the example on a real 3-master Redis Cluster.
func TestRedisCluster(t *testing.T) {
	bins := build(t)
	cluster := redistest.RequireCluster(t, 3)
	server := start(t, bins["net/http"], "-redis-cluster", strings.Join(cluster.Addrs(), ","), "-limit", "4", "-window", "1m", "-fallback-budget", steadyBudget)
	for i, want := range []int{200, 200, 200, 200, 429} {
		if got := send(t, "GET", server+"/", nil, nil).StatusCode; got != want {
			t.Fatalf("GET / #%d on the cluster: got %d, want %d", i, got, want)
		}
	}
	for i := range 12 {
		if got := send(t, "GET", server+"/api/x", map[string]string{"X-API-Key": fmt.Sprintf("key-%d", i)}, nil).StatusCode; got != 200 {
			t.Fatalf("GET /api/ with key %d: got %d, want 200", i, got)
		}
	}
}

// TestEveryFramework runs the example's routes on net/http, Gin and Echo,
// each on both backends. On a real Redis it also checks that the
// decisions, and the reset of a login, were made there rather than in the
// fallback's memory.
func TestEveryFramework(t *testing.T) {
	forEachServer(t, func(t *testing.T, framework, bin string, args []string, client *redis.Client) {
		server := start(t, bin, append(args, "-limit", "3", "-window", "1m", "-algorithm", "fixed-window")...)

		// GET /quota shows GET /'s quota without spending it.
		quota := func(when string, remaining int) {
			t.Helper()
			for range 2 {
				resp, err := http.Get(server + "/quota")
				if err != nil {
					t.Fatal(err)
				}
				var q struct {
					Limit, Remaining int
					ResetMS          int64 `json:"reset_ms"`
				}
				err = json.NewDecoder(resp.Body).Decode(&q)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("GET /quota %s: %d, %v", when, resp.StatusCode, err)
				}
				if q.Limit != 3 || q.Remaining != remaining || q.ResetMS < 0 || q.ResetMS > 60_000 {
					t.Errorf("GET /quota %s: %+v, want limit 3, remaining %d, reset within a minute", when, q, remaining)
				}
			}
		}
		quota("before any request", 3)
		send(t, "GET", server+"/", nil, nil)
		quota("after one request", 2)

		for i, want := range []int{200, 200, 429, 429} {
			resp := send(t, "GET", server+"/", nil, nil)
			if resp.StatusCode != want {
				t.Fatalf("GET / #%d: got %d, want %d", i, resp.StatusCode, want)
			}
			if got := resp.Header.Get("RateLimit-Policy"); got != `"home";q=3;w=60` {
				t.Errorf("GET / #%d: RateLimit-Policy %q", i, got)
			}
			if want == 429 && resp.Header.Get("Retry-After") != "60" {
				t.Errorf("GET / denied: Retry-After %q, want 60", resp.Header.Get("Retry-After"))
			}
		}
		if client != nil {
			if k := keys(t, client, homeKeys); len(k) != 1 {
				t.Errorf("GET /: Redis holds keys %q, want the client IP's one", k)
			}
		}

		wrong, right := url.Values{"password": {"guess"}}, url.Values{"password": {"letmein"}}
		steps := []struct {
			form      url.Values
			want      int
			remaining string // X-RateLimit-Remaining
			banned    bool   // denied by a ban, which the body says
		}{
			// Only failures count; a counted failure's headers say
			// what is left after it, an uncounted success's what was
			// left before it.
			{wrong, 401, "4", false}, {wrong, 401, "3", false}, {right, 200, "3", false}, // a success never counts, and clears the failures
			{right, 200, "5", false},
			{wrong, 401, "4", false}, {wrong, 401, "3", false}, {wrong, 401, "2", false}, {wrong, 401, "1", false}, {wrong, 401, "0", false},
			{right, 429, "0", false}, // five failures within the minute: even the right password waits
			{wrong, 429, "0", false},
			{wrong, 429, "0", true}, // the third denial within the minute bans the client for a minute
			{right, 429, "0", true},
		}
		for i, st := range steps {
			resp := send(t, "POST", server+"/login", nil, st.form)
			if resp.StatusCode != st.want {
				t.Fatalf("POST /login #%d: got %d, want %d", i, resp.StatusCode, st.want)
			}
			if got := resp.Header.Get("RateLimit-Policy"); got != `"login";q=5;w=60` {
				t.Errorf("POST /login #%d: RateLimit-Policy %q", i, got)
			}
			if got := resp.Header.Get("X-RateLimit-Remaining"); got != st.remaining {
				t.Errorf("POST /login #%d: X-RateLimit-Remaining %q, want %q", i, got, st.remaining)
			}
			body, _ := io.ReadAll(resp.Body)
			if banned := strings.Contains(string(body), "banned"); banned != st.banned {
				t.Errorf("POST /login #%d: body %q, want banned %v", i, body, st.banned)
			}
			if st.banned && resp.Header.Get("Retry-After") != "60" {
				t.Errorf("POST /login #%d: banned with Retry-After %q, want 60, the ban's minute", i, resp.Header.Get("Retry-After"))
			}
			if client != nil {
				want := 2 // the failures' log, and the attempts lately settled
				switch {
				case st.want == 200:
					want = 1 // the reset deleted the attempts on Redis; the success's end is settled since
				case st.want == 429:
					want = 3 // and the denials' ban state
				}
				if k := keys(t, client, loginKeys); len(k) != want {
					t.Errorf("POST /login #%d: Redis holds login keys %q, want %d", i, k, want)
				}
				if st.banned {
					ttl, err := client.PTTL(context.Background(), k0(keys(t, client, `example:{login|\*|ip:*}:b`))).Result()
					if err != nil || ttl <= 0 {
						t.Errorf("POST /login #%d: the ban state's TTL is %v, %v; want one", i, ttl, err)
					}
				}
			}
		}

		if resp := send(t, "GET", server+"/api/things", nil, nil); resp.StatusCode != 400 {
			t.Errorf("GET /api/ without a key: got %d, want 400", resp.StatusCode)
		}
		// The bucket holds 10: the first 10 pass at once, and 20 quick
		// requests cannot all pass at 10 per second.
		codes := map[int]int{}
		for i := range 20 {
			resp := send(t, "GET", server+"/api/things", map[string]string{"X-API-Key": "k-" + framework}, nil)
			if i < 10 && resp.StatusCode != 200 {
				t.Fatalf("GET /api/ #%d: got %d, want 200", i, resp.StatusCode)
			}
			codes[resp.StatusCode]++
		}
		if codes[429] == 0 {
			t.Errorf("20 quick API requests: %v, want some 429", codes)
		}
		if resp := send(t, "GET", server+"/api/things", map[string]string{"X-API-Key": "other"}, nil); resp.StatusCode != 200 {
			t.Errorf("another API key: got %d, want 200", resp.StatusCode)
		}
		// A "pro-" key has the pro plan, from the same Limiter: a
		// bucket of 100, so 20 quick requests all pass. The handler
		// reads what is left from the decision in the request.
		for i := range 20 {
			resp := send(t, "GET", server+"/api/things", map[string]string{"X-API-Key": "pro-" + framework}, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("GET /api/ with a pro key #%d: got %d, want 200", i, resp.StatusCode)
			}
			var body struct {
				Left []struct {
					Limit     string
					Remaining int
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Left) != 2 ||
				body.Left[0].Limit != "pro-second" || body.Left[1].Limit != "pro-hour" || body.Left[1].Remaining != 10_000-1-i {
				t.Fatalf("GET /api/ with a pro key #%d: body %+v, %v; want what pro-second and pro-hour have left, %d of the hour", i, body, err, 10_000-1-i)
			}
			if got := resp.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(body.Left[0].Remaining) {
				t.Fatalf("GET /api/ with a pro key #%d: X-RateLimit-Remaining %q, the body says pro-second has %d", i, got, body.Left[0].Remaining)
			}
			if got, want := resp.Header.Get("RateLimit-Policy"), `"pro-second";q=100;w=1, "pro-hour";q=10000;w=3600`; got != want {
				t.Fatalf("GET /api/ with a pro key: RateLimit-Policy %q, want %q", got, want)
			}
		}
		if client != nil {
			// Two limits for each of the three keys: the hour's
			// window for each, and its bucket unless the bucket
			// has refilled and so expired (10 a second refills
			// "other"'s one request in 100ms, which a busy
			// machine may take before this reads the keys).
			k := keys(t, client, apiKeys)
			hours := 0
			for _, key := range k {
				if strings.HasSuffix(key, ":s3600000/10") {
					hours++
				}
			}
			if hours != 3 || len(k) > 6 {
				t.Errorf("GET /api/: Redis holds keys %q, want 2 limits for each of 3 API keys (an hour's window each, and its bucket until it refills)", k)
			}
		}
	})
}

// k0 returns the first of keys, or "" when there is none.
func k0(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// TestSpentLimitRecovers spends GET / and polls until a request passes
// again, for every algorithm on both backends: like a real Redis, the
// embedded one forgets by the wall clock, not early and not never, and a
// client that waits the Retry-After of its denial gets through. It polls
// because the example runs on the wall clock, which a test cannot pin.
func TestSpentLimitRecovers(t *testing.T) {
	bins := build(t)
	const (
		window = time.Second
		poll   = 50 * time.Millisecond
		slack  = 150 * time.Millisecond // the embedded Redis's TTLs move in 50ms steps; a busy machine delays them
	)
	for _, c := range []struct {
		algorithm string
		earliest  time.Duration // after the first request, when one may pass again
	}{
		{"fixed-window", window},               // the counter expires
		{"sliding-log", window},                // the first entry leaves the window
		{"sliding-window", window - window/10}, // its slot, a tenth of the window, leaves it
		{"token-bucket", window / 2},           // one of the 2 tokens refills
	} {
		for _, b := range backends {
			t.Run(c.algorithm+"/"+b, func(t *testing.T) {
				t.Parallel()
				args, _ := backend(t, b)
				server := start(t, bins["net/http"], append(args, "-algorithm", c.algorithm, "-limit", "2", "-window", window.String())...)
				first := time.Now()
				var denied time.Time // when the request that was denied went out
				var retryAfter time.Duration
				for i, want := range []int{200, 200, 429} {
					denied = time.Now()
					resp := send(t, "GET", server+"/", nil, nil)
					if resp.StatusCode != want {
						t.Fatalf("GET / #%d: got %d, want %d", i, resp.StatusCode, want)
					}
					if want == 429 {
						s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
						if err != nil {
							t.Fatalf("GET / denied: Retry-After %q: %v", resp.Header.Get("Retry-After"), err)
						}
						retryAfter = time.Duration(s) * time.Second
					}
				}
				for {
					time.Sleep(poll)
					code := send(t, "GET", server+"/", nil, nil).StatusCode
					since := time.Since(first)
					if code == 200 {
						if since < c.earliest-slack {
							t.Errorf("passed again %v after the first request, want at least %v", since, c.earliest)
						}
						if late := time.Since(denied) - retryAfter; late > poll+slack {
							t.Errorf("passed again %v after the denial's Retry-After of %v", late, retryAfter)
						}
						return
					}
					if code != 429 {
						t.Fatalf("GET /: got %d, want 200 or 429", code)
					}
					if since > window+time.Second {
						t.Fatalf("GET / still denied %v after the first request; the window is %v", since, window)
					}
				}
			})
		}
	}
}
