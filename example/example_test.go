package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/redistest"
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
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
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
			if _, u, ok := strings.Cut(sc.Text(), "listening on "); ok {
				found <- u
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("%s exited: %s", bin, stderr.String())
		}
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start: %s", bin, stderr.String())
	}
	return ""
}

// send makes a request and returns the status and response.
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
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
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
			args := []string{"-redis", redisURL, "-algorithm", algorithm, "-limit", "10", "-window", "1m"}
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
	redisURL := "redis://" + redistest.Require(t).Addr + "/0"
	server := start(t, bins["net/http"], "-redis", redisURL, "-limit", "5", "-window", "1m", "-trusted-proxies", "10.0.0.0/8,192.168.0.0/16")
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
}

// TestRedisCluster runs the example on a real 3-master Redis Cluster.
func TestRedisCluster(t *testing.T) {
	bins := build(t)
	cluster := redistest.RequireCluster(t, 3)
	server := start(t, bins["net/http"], "-redis-cluster", strings.Join(cluster.Addrs(), ","), "-limit", "4", "-window", "1m")
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
// each with its embedded Redis.
func TestEveryFramework(t *testing.T) {
	bins := build(t)
	for _, framework := range []string{"net/http", "gin", "echo"} {
		t.Run(framework, func(t *testing.T) {
			t.Parallel()
			server := start(t, bins[framework], "-limit", "3", "-window", "1m", "-algorithm", "fixed-window")

			for i, want := range []int{200, 200, 200, 429} {
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

			wrong, right := url.Values{"password": {"guess"}}, url.Values{"password": {"letmein"}}
			steps := []struct {
				form url.Values
				want int
			}{
				{wrong, 401}, {wrong, 401}, {wrong, 401}, {wrong, 401},
				{right, 200}, // resets the failed attempts
				{wrong, 401}, {wrong, 401}, {wrong, 401}, {wrong, 401}, {wrong, 401},
				{right, 429}, // five attempts within the minute: even the right password waits
			}
			for i, st := range steps {
				resp := send(t, "POST", server+"/login", nil, st.form)
				if resp.StatusCode != st.want {
					t.Fatalf("POST /login #%d: got %d, want %d", i, resp.StatusCode, st.want)
				}
				if got := resp.Header.Get("RateLimit-Policy"); got != `"login";q=5;w=60` {
					t.Errorf("POST /login #%d: RateLimit-Policy %q", i, got)
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
		})
	}
}
