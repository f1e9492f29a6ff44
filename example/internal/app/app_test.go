package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var algorithms = []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket}

// newApp builds an App from c, closed when t ends.
func newApp(t *testing.T, c Config) *App {
	t.Helper()
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// get sends GET / through h and returns the status.
func get(h http.Handler) int {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	return w.Code
}

// TestEmbeddedKeysExpire spends GET / on the embedded Redis and waits for
// its keys to expire by the wall clock alone, as on a real Redis, for every
// algorithm: every key has a TTL, and the last one goes within a second of
// it, and not much before it.
func TestEmbeddedKeysExpire(t *testing.T) {
	for _, algorithm := range algorithms {
		t.Run(algorithm.String(), func(t *testing.T) {
			t.Parallel()
			// A budget no loaded machine overruns: the keys are to be on
			// the embedded Redis, not decided in process.
			a := newApp(t, Config{Algorithm: algorithm, Limit: 2, Window: time.Second, FallbackBudget: 10 * time.Second})
			h := a.IP.Handler(http.HandlerFunc(Home))
			// The soonest a unit can come back: a window, or the token
			// bucket's half second per unit.
			back := time.Second
			if algorithm == ratelimit.TokenBucket {
				back = time.Second / 2
			}
			start := time.Now()
			for i, want := range []int{200, 200, 429} {
				got := get(h)
				if got == 200 && want == 429 && time.Since(start) >= back {
					// The requests took that long: a unit may be back.
					t.Logf("GET / #%d: 200 after %v", i, time.Since(start))
					continue
				}
				if got != want {
					t.Fatalf("GET / #%d: got %d, want %d", i, got, want)
				}
			}
			keys := a.mini.Keys()
			if len(keys) == 0 {
				t.Fatal("no key in the embedded Redis after GET /")
			}
			read := time.Now()
			var longest time.Duration
			for _, k := range keys {
				ttl := a.mini.TTL(k)
				if ttl <= 0 {
					t.Errorf("key %q: TTL %v, want one", k, ttl)
				}
				longest = max(longest, ttl)
			}
			// The clock is the wall clock, so this waits for it to pass.
			for ; len(keys) > 0; keys = a.mini.Keys() {
				if time.Since(read) > longest+time.Second {
					t.Fatalf("keys %q still there %v after their TTL was at most %v", keys, time.Since(read), longest)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// TTLs move in steps of clockStep; a slow machine may space them
			// out, so allow a few.
			if got, want := time.Since(read), longest-5*clockStep; got < want {
				t.Errorf("keys expired %v after their longest TTL was %v, want at least %v", got, longest, want)
			}
		})
	}
}

// TestEmbeddedTime checks that a script reading TIME on the embedded Redis,
// as the algorithms do, gets the wall clock, now and later.
func TestEmbeddedTime(t *testing.T) {
	a := newApp(t, Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Second})
	client := redis.NewClient(&redis.Options{Addr: a.mini.Addr()})
	defer client.Close()
	for i := range 2 {
		if i > 0 {
			time.Sleep(3 * clockStep) // a clock that moved in steps would lag now
		}
		before := time.Now().Truncate(time.Microsecond)
		v, err := client.Eval(context.Background(), "return redis.call('TIME')", nil).StringSlice()
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 2 {
			t.Fatalf("TIME: got %q, want seconds and microseconds", v)
		}
		sec, err1 := strconv.ParseInt(v[0], 10, 64)
		usec, err2 := strconv.ParseInt(v[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("TIME: got %q, want two integers", v)
		}
		got := time.Unix(sec, usec*1000)
		if got.Before(before) || got.After(after) {
			t.Errorf("reading %d: TIME in a script is %v, want between %v and %v", i, got, before, after)
		}
	}
}

// TestCloseStopsGoroutines builds and closes the App on the embedded Redis
// and on a real one behind store.Fallback: nothing it started keeps
// running.
func TestCloseStopsGoroutines(t *testing.T) {
	for _, c := range []struct {
		name   string
		config func(t *testing.T) Config
	}{
		{"embedded", func(*testing.T) Config { return Config{} }},
		{"redis", func(t *testing.T) Config {
			return Config{Redis: Redis{URL: "redis://" + redistest.Require(t).Addr + "/0"}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			config := c.config(t)
			config.Algorithm, config.Limit, config.Window = ratelimit.FixedWindow, 1, time.Second
			before := goleak.IgnoreCurrent()
			a, err := New(config)
			if err != nil {
				t.Fatal(err)
			}
			get(a.IP.Handler(http.HandlerFunc(Home)))
			a.Close()
			goleak.VerifyNone(t, before)
		})
	}
}

// TestParseFlagsRedis: a flag naming Redis wins over the environment;
// two flags, or two variables, are refused; TLS files need TLS.
func TestParseFlagsRedis(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tt := range []struct {
		name    string
		args    []string
		getenv  func(string) string
		want    Redis
		wantErr string
	}{
		{"nothing: embedded", nil, env(), Redis{}, ""},
		{"$REDIS_URL", nil, env("REDIS_URL", "redis://a:1/0"), Redis{URL: "redis://a:1/0"}, ""},
		{"$REDIS_CLUSTER_URL", nil, env("REDIS_CLUSTER_URL", "redis://a:1"), Redis{Cluster: "redis://a:1"}, ""},
		{"$REDIS_SENTINEL_URL", nil, env("REDIS_SENTINEL_URL", "redis://s:1?master_name=m"), Redis{Sentinel: "redis://s:1?master_name=m"}, ""},
		{"-redis-cluster wins over $REDIS_URL", []string{"-redis-cluster", "a:1,b:2"}, env("REDIS_URL", "redis://x:1/0"), Redis{Cluster: "a:1,b:2"}, ""},
		{"-redis wins over $REDIS_CLUSTER_URL", []string{"-redis", "redis://a:1/0"}, env("REDIS_CLUSTER_URL", "redis://x:1"), Redis{URL: "redis://a:1/0"}, ""},
		{"-redis-sentinel wins over both", []string{"-redis-sentinel", "redis://s:1?master_name=m"}, env("REDIS_URL", "redis://x:1/0", "REDIS_CLUSTER_URL", "redis://y:1"), Redis{Sentinel: "redis://s:1?master_name=m"}, ""},
		{"TLS files from the environment", nil, env("REDIS_URL", "rediss://a:1/0", "REDIS_CA_FILE", "ca.pem", "REDIS_CERT_FILE", "c.pem", "REDIS_KEY_FILE", "k.pem"),
			Redis{URL: "rediss://a:1/0", CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}, ""},
		{"a CA flag wins over $REDIS_CA_FILE", []string{"-redis", "rediss://a:1/0", "-redis-ca", "mine.pem"}, env("REDIS_CA_FILE", "ca.pem"), Redis{URL: "rediss://a:1/0", CAFile: "mine.pem"}, ""},
		{"two flags", []string{"-redis", "redis://a:1/0", "-redis-cluster", "a:1"}, env(), Redis{}, "give one of"},
		{"two variables", nil, env("REDIS_URL", "redis://a:1/0", "REDIS_CLUSTER_URL", "redis://b:1"), Redis{}, "$REDIS_URL and $REDIS_CLUSTER_URL are both set"},
		{"a certificate without its key", []string{"-redis", "rediss://a:1/0", "-redis-cert", "c.pem"}, env(), Redis{}, "go together"},
		{"a CA without TLS", []string{"-redis", "redis://a:1/0", "-redis-ca", "ca.pem"}, env(), Redis{}, "are for TLS"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseFlags("test", "net/http", tt.args, tt.getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error saying %q", c.Redis, err, tt.wantErr)
				}
				return
			}
			if err != nil || c.Redis != tt.want {
				t.Fatalf("got %+v, %v; want %+v", c.Redis, err, tt.want)
			}
		})
	}
}

// TestParseFlagsKeySecret: -key-secret wins over $RATELIMIT_KEY_SECRET,
// which stands in for it; neither leaves it empty.
func TestParseFlagsKeySecret(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"neither", nil, "", ""},
		{"$RATELIMIT_KEY_SECRET", nil, "from-the-environment", "from-the-environment"},
		{"-key-secret", []string{"-key-secret", "from-the-flag"}, "", "from-the-flag"},
		{"-key-secret wins", []string{"-key-secret", "from-the-flag"}, "from-the-environment", "from-the-flag"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "RATELIMIT_KEY_SECRET" {
					return tt.env
				}
				return ""
			}
			c, err := ParseFlags("test", "net/http", tt.args, getenv)
			if err != nil || c.KeySecret != tt.want {
				t.Fatalf("got %q, %v; want %q", c.KeySecret, err, tt.want)
			}
		})
	}
}

// TestDescribeBan: a ban in words, as the startup lines give it.
func TestDescribeBan(t *testing.T) {
	tests := []struct {
		ban  ratelimit.Ban
		want string
	}{
		{LoginBan, "3 denials within 1m ban for 1m, each ban twice the last, up to 1h"},
		{ratelimit.Ban{After: 5, Within: 10 * time.Second, For: 90 * time.Second}, "5 denials within 10s ban for 1m30s"},
		{ratelimit.Ban{After: 1, Within: time.Hour, For: 2 * time.Hour, Max: 2 * time.Hour}, "1 denial within 1h ban for 2h"},
	}
	for _, tt := range tests {
		if got := describeBan(tt.ban); got != tt.want {
			t.Errorf("describeBan(%+v): got %q, want %q", tt.ban, got, tt.want)
		}
	}
}
