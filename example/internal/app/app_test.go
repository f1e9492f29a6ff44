package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
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
			a := newApp(t, Config{Algorithm: algorithm, Limit: 2, Window: time.Second})
			h := a.IP.Handler(http.HandlerFunc(Home))
			for i, want := range []int{200, 200, 429} {
				if got := get(h); got != want {
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
		{"redis", func(t *testing.T) Config { return Config{RedisURL: "redis://" + redistest.Require(t).Addr + "/0"} }},
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
