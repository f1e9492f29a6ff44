package ratelimit_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
)

// testSecret is a secret for Header.
var testSecret = []byte("a test secret, 32 bytes at least")

// mustHeader is ratelimit.Header, failing t on an error.
func mustHeader(t testing.TB, name string, secret []byte) ratelimit.KeyFunc {
	t.Helper()
	key, err := ratelimit.HeaderKey(name, secret)
	if err != nil {
		t.Fatalf("Header: %v", err)
	}
	return key
}

// headerKey is the key Header documents for value under secret, with
// name in canonical form.
func headerKey(name string, secret []byte, value string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(value))
	return "header:" + name + ":" + hex.EncodeToString(m.Sum(nil)[:16])
}

func constKey(s string) ratelimit.KeyFunc {
	return func(*http.Request) (string, error) { return s, nil }
}

type userKey struct{}

type userID int

func (u userID) String() string { return "u" + string(rune('0'+int(u))) }

func TestKeyFuncs(t *testing.T) {
	req := func(mod func(*http.Request) *http.Request) *http.Request {
		r := httptest.NewRequest("POST", "/login?x=1", nil)
		return mod(r)
	}
	apiKey := mustHeader(t, "x-api-key", testSecret)
	tests := []struct {
		name string
		key  ratelimit.KeyFunc
		r    *http.Request
		want string // "" means ErrInvalid
	}{
		{"header", apiKey, req(func(r *http.Request) *http.Request { r.Header.Set("X-API-Key", "k1"); return r }), headerKey("X-Api-Key", testSecret, "k1")},
		{"header missing", apiKey, req(func(r *http.Request) *http.Request { return r }), ""},
		{"header empty", apiKey, req(func(r *http.Request) *http.Request { r.Header.Set("X-API-Key", ""); return r }), ""},
		{"header first line", apiKey, req(func(r *http.Request) *http.Request {
			r.Header.Add("X-API-Key", "a")
			r.Header.Add("X-API-Key", "b")
			return r
		}), headerKey("X-Api-Key", testSecret, "a")},
		{"user string", ratelimit.User(userKey{}), req(func(r *http.Request) *http.Request {
			return r.WithContext(context.WithValue(r.Context(), userKey{}, "alice"))
		}), "user:alice"},
		{"user stringer", ratelimit.User(userKey{}), req(func(r *http.Request) *http.Request {
			return r.WithContext(context.WithValue(r.Context(), userKey{}, userID(7)))
		}), "user:u7"},
		{"no user", ratelimit.User(userKey{}), req(func(r *http.Request) *http.Request { return r }), ""},
		{"user of another type", ratelimit.User(userKey{}), req(func(r *http.Request) *http.Request {
			return r.WithContext(context.WithValue(r.Context(), userKey{}, 42))
		}), ""},
		{"route from ServeMux", ratelimit.Route, req(func(r *http.Request) *http.Request { r.Pattern = "POST /login"; return r }), "route:POST /login"},
		{"route without method", ratelimit.Route, req(func(r *http.Request) *http.Request { r.Pattern = "/login"; return r }), "route:POST /login"},
		{"route from an adapter", ratelimit.Route, req(func(r *http.Request) *http.Request { r.Pattern = "/users/{id}"; return r }), "route:POST /users/{id}"},
		{"no route: never the raw path", ratelimit.Route, req(func(r *http.Request) *http.Request { return r }), ""},
		{"join", ratelimit.Join(ratelimit.Route, apiKey), req(func(r *http.Request) *http.Request {
			r.Pattern = "POST /login"
			r.Header.Set("X-API-Key", "k1")
			return r
		}), "17:route:POST /login49:" + headerKey("X-Api-Key", testSecret, "k1")},
		{"join fails with a part", ratelimit.Join(ratelimit.Route, apiKey), req(func(r *http.Request) *http.Request { r.Pattern = "/x"; return r }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.key(tt.r)
			checkKey(t, got, err, tt.want)
		})
	}
}

// TestJoinIsUnambiguous: parts that concatenate alike still join apart.
func TestJoinIsUnambiguous(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	seen := map[string][2]string{}
	for _, parts := range [][2]string{{"ab", "c"}, {"a", "bc"}, {"a:", "b"}, {"a", ":b"}, {"1:a", ""}, {"", "1:a"}, {"2:ab", "1:c"}} {
		k, _ := ratelimit.Join(constKey(parts[0]), constKey(parts[1]))(r)
		if prev, ok := seen[k]; ok {
			t.Errorf("Join(%q, %q) = Join(%q, %q) = %q", parts[0], parts[1], prev[0], prev[1], k)
		}
		seen[k] = parts
	}
}

// FuzzJoin checks that Join never gives two different pairs of keys the
// same joined key.
func FuzzJoin(f *testing.F) {
	f.Add("ab", "c", "a", "bc")
	f.Add("1:a", "", "", "1:a")
	f.Add("ip:1.2.3.4", "header:X:k", "ip:1.2.3.4header:X:k", "")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		join := func(x, y string) string {
			k, err := ratelimit.Join(constKey(x), constKey(y))(httptest.NewRequest("GET", "/", nil))
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		if (join(a, b) == join(c, d)) != (a == c && b == d) {
			t.Fatalf("Join(%q, %q) = %q, Join(%q, %q) = %q", a, b, join(a, b), c, d, join(c, d))
		}
	})
}

func TestHeaderSecret(t *testing.T) {
	tests := []struct {
		name   string
		secret []byte
		ok     bool
	}{
		{"none", nil, false},
		{"empty", []byte{}, false},
		{"15 bytes", []byte("fifteen bytes!!"), false},
		{"16 bytes", []byte("sixteen bytes!!!"), true},
		{"32 bytes", testSecret, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := ratelimit.HeaderKey("X-API-Key", tt.secret)
			if tt.ok {
				if err != nil || key == nil {
					t.Fatalf("got (%v, %v), want a KeyFunc", key != nil, err)
				}
				return
			}
			if !errors.Is(err, ratelimit.ErrInvalid) || key != nil || !strings.Contains(err.Error(), `HeaderKey("X-API-Key")`) {
				t.Fatalf("got (%v, %v), want ErrInvalid naming Header", key != nil, err)
			}
		})
	}
}

// TestHeaderKeys: the key is a keyed hash of the value, the same on every
// instance with the same secret, different under another secret.
func TestHeaderKeys(t *testing.T) {
	other := []byte("another secret of 32 bytes, too!")
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "k1")
	key := func(name string, secret []byte) string {
		t.Helper()
		k, err := mustHeader(t, name, secret)(r)
		if err != nil {
			t.Fatalf("HeaderKey(%q): %v", name, err)
		}
		return k
	}
	a := key("X-API-Key", testSecret)
	if want := headerKey("X-Api-Key", testSecret, "k1"); a != want {
		t.Errorf("got %q, want %q", a, want)
	}
	if b := key("x-api-key", testSecret); b != a {
		t.Errorf("another instance, the name in lower case: got %q, want %q", b, a)
	}
	if b := key("X-API-Key", other); b == a {
		t.Errorf("another secret: got %q again, want another key", b)
	}
	if strings.Contains(a, "k1") {
		t.Errorf("the key %q holds the value", a)
	}
}

// TestHeaderIsSafeForConcurrentUse: one KeyFunc hashes many requests at
// once, each with its own value (run with -race).
func TestHeaderIsSafeForConcurrentUse(t *testing.T) {
	key := mustHeader(t, "X-API-Key", testSecret)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				v := fmt.Sprintf("key-%d-%d", g, i)
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-API-Key", v)
				got, err := key(r)
				if want := headerKey("X-Api-Key", testSecret, v); err != nil || got != want {
					t.Errorf("got (%q, %v), want %q", got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// apiKeyValue is an API key as a client sends it; it must never reach
// Redis or the logs.
const apiKeyValue = "sk_live_Qz7RvT2mXw9LpK4n"

// TestSecretsStayOutOfRedis sends an API key through Limiters keyed by
// Header on a real redis-server: no key of the server holds it, the
// counters' keys hold its keyed hash, and under another secret the same
// API key counts under another key.
func TestSecretsStayOutOfRedis(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	s := newRedisStore(t, c, prefix)
	other := []byte("another secret of 32 bytes, too!")
	limits := ratelimit.WithLimits(
		ratelimit.PerMinute(5).Using(ratelimit.FixedWindow),
		ratelimit.PerMinute(5).Using(ratelimit.SlidingLog),
		ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.TokenBucket),
		ratelimit.PerSecond(10))
	first := newLimiter(t, s, "keys", ratelimit.WithKey(mustHeader(t, "X-API-Key", testSecret)), limits).Handler(http.HandlerFunc(adaptertest.OK))
	second := newLimiter(t, s, "keys", ratelimit.WithKey(mustHeader(t, "X-API-Key", other)), limits).Handler(http.HandlerFunc(adaptertest.OK))
	for i, st := range []struct {
		h         http.Handler
		remaining string
	}{{first, "4"}, {first, "3"}, {second, "4"}, {first, "2"}} {
		w := serve(st.h, "GET", "/", withHeader("X-API-Key", apiKeyValue))
		if got := w.Header().Get("X-RateLimit-Remaining"); w.Code != 200 || got != st.remaining {
			t.Errorf("request %d: got %d with %q remaining, want 200 with %q", i, w.Code, got, st.remaining)
		}
	}

	for _, k := range scanKeys(t, c, "*") {
		if strings.Contains(k, apiKeyValue) || strings.Contains(k, apiKeyValue[8:]) {
			t.Errorf("Redis holds the key %q, which shows the API key", k)
		}
	}
	counters := counterKeys(t, c, prefix)
	for _, secret := range [][]byte{testSecret, other} {
		start := prefix + "{keys|*|" + headerKey("X-Api-Key", secret, apiKeyValue) + "}:"
		n := 0
		for _, k := range counters {
			if strings.HasPrefix(k, start) {
				n++
			}
		}
		if n != 4 {
			t.Errorf("got %d keys starting %q, want one per limit, 4, among %q", n, start, counters)
		}
	}
	if len(counters) != 8 {
		t.Errorf("got %d counters' keys, want 8: %q", len(counters), counters)
	}
}

// quoting is a store whose errors quote the key it was given, as a careless
// store might.
type quoting struct{}

func (quoting) Allow(_ context.Context, key string, _ int, _ *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, fmt.Errorf("cannot decide %q: connection reset", key)
}

func (quoting) Peek(_ context.Context, key string, _ int, _ *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, fmt.Errorf("cannot peek at %q: connection reset", key)
}

func (quoting) Reset(_ context.Context, key string, _ *ratelimit.Limits) error {
	return fmt.Errorf("cannot reset %q: connection reset", key)
}

// TestSecretsStayOutOfLogs: when the store fails, the line the Limiter
// logs never shows the API key, even from a store that quotes its key.
func TestSecretsStayOutOfLogs(t *testing.T) {
	t.Parallel()
	hashed := headerKey("X-Api-Key", testSecret, apiKeyValue)
	tests := []struct {
		name  string
		store func(t *testing.T) ratelimit.Store
		want  string // in the log line
	}{
		{"a Redis key holding a foreign value", func(t *testing.T) ratelimit.Store {
			c, prefix := sharedRedis(t)
			if err := c.LPush(context.Background(), prefix+"{logs|*|"+hashed+"}:f60000", "foreign").Err(); err != nil {
				t.Fatal(err)
			}
			return newRedisStore(t, c, prefix)
		}, "WRONGTYPE"},
		{"a store quoting its key", func(*testing.T) ratelimit.Store { return quoting{} }, hashed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			var seen counts
			l := newLimiter(t, tt.store(t), "logs", ratelimit.WithKey(mustHeader(t, "X-API-Key", testSecret)), ratelimit.WithObserver(seen.observe),
				ratelimit.WithLimits(ratelimit.PerMinute(5).Using(ratelimit.FixedWindow)),
				ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			w := serve(l.Handler(http.HandlerFunc(adaptertest.OK)), "GET", "/", withHeader("X-API-Key", apiKeyValue))
			if w.Code != 200 {
				t.Errorf("failing open: got %d, want 200", w.Code)
			}
			if n := seen.of("store_error"); n != 1 {
				t.Errorf("observed %d store errors, want 1", n)
			}
			line := logs.String()
			if !strings.Contains(line, "store failed") || !strings.Contains(line, tt.want) {
				t.Errorf("log %q: want the store's failure, with %q", line, tt.want)
			}
			if strings.Contains(line, apiKeyValue) || strings.Contains(line, apiKeyValue[8:]) {
				t.Errorf("log %q shows the API key", line)
			}
		})
	}
}

// checkKey fails t unless a KeyFunc returned want, or, when want is "",
// an error wrapping ErrInvalid.
func checkKey(t *testing.T, got string, err error, want string) {
	t.Helper()
	if want == "" {
		if !errors.Is(err, ratelimit.ErrInvalid) {
			t.Fatalf("got (%q, %v), want ErrInvalid", got, err)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("got (%q, %v), want %q", got, err, want)
	}
}
