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
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
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
	return func(ratelimit.Request) (string, error) { return s, nil }
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

func (quoting) End(context.Context, string, int, *ratelimit.Limits, ratelimit.Decision) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, nil
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

type ipCase struct {
	name    string
	remote  string
	headers [][2]string // in order; a name may repeat
	want    string      // "" means ErrInvalid
}

func runIPCases(t *testing.T, cfg ratelimit.IPKey, cases []ipCase) {
	t.Helper()
	key, err := cfg.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, h := range tt.headers {
				r.Header.Add(h[0], h[1])
			}
			got, err := key(r)
			checkKey(t, got, err, tt.want)
		})
	}
}

// TestIPKeyZeroValue: the zero IPKey, a Limiter's default key, keys by the
// connection's peer and believes no header.
func TestIPKeyZeroValue(t *testing.T) {
	runIPCases(t, ratelimit.IPKey{}, []ipCase{
		{"IPv4 with port", "192.0.2.1:1234", nil, "ip:192.0.2.1"},
		{"IPv4 without port", "192.0.2.1", nil, "ip:192.0.2.1"},
		{"IPv6 with port", "[2001:db8:1:2:3:4:5:6]:443", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 same /64", "[2001:db8:1:2:ffff::1]:443", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 without port", "2001:db8:1:3::9", nil, "ip:2001:db8:1:3::/64"},
		{"IPv6 with zone", "[fe80::1%eth0]:80", nil, "ip:fe80::/64"},
		{"IPv4-mapped", "[::ffff:192.0.2.1]:80", nil, "ip:192.0.2.1"},
		{"IPv4-mapped without port", "::ffff:c000:201", nil, "ip:192.0.2.1"},
		{"forwarding headers ignored", "192.0.2.1:80", [][2]string{{"X-Forwarded-For", "198.51.100.1"}, {"X-Real-IP", "198.51.100.2"}, {"Forwarded", "for=198.51.100.3"}}, "ip:192.0.2.1"},
		{"garbage", "not an address", nil, ""},
		{"empty", "", nil, ""},
		{"unix socket", "@", nil, ""},
	})
}

func TestClientIPBehindProxies(t *testing.T) {
	trusted := []string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.254"}
	xff := "X-Forwarded-For"
	runIPCases(t, ratelimit.IPKey{TrustedProxies: trusted}, []ipCase{
		{"untrusted peer: header ignored", "198.51.100.9:1", [][2]string{{xff, "203.0.113.1"}}, "ip:198.51.100.9"},
		{"trusted peer", "10.0.0.1:1", [][2]string{{xff, "203.0.113.1"}}, "ip:203.0.113.1"},
		{"trusted single address", "192.0.2.254:1", [][2]string{{xff, "203.0.113.1"}}, "ip:203.0.113.1"},
		{"trusted peer, no header", "10.0.0.1:1", nil, "ip:10.0.0.1"},
		{"chain: rightmost untrusted wins", "10.0.0.1:1", [][2]string{{xff, "1.1.1.1, 203.0.113.1, 10.0.0.7"}}, "ip:203.0.113.1"},
		{"untrusted hop in the middle stops the walk", "10.0.0.1:1", [][2]string{{xff, "203.0.113.1, 198.51.100.5, 10.0.0.2"}}, "ip:198.51.100.5"},
		{"several lines, in order", "10.0.0.1:1", [][2]string{{xff, "203.0.113.1"}, {xff, "203.0.113.2, 10.0.0.3"}}, "ip:203.0.113.2"},
		{"all trusted: leftmost", "10.0.0.1:1", [][2]string{{xff, "10.0.0.9, 10.0.0.8"}}, "ip:10.0.0.9"},
		{"entry with port", "10.0.0.1:1", [][2]string{{xff, "203.0.113.1:5555"}}, "ip:203.0.113.1"},
		{"IPv6 entry in brackets with port", "10.0.0.1:1", [][2]string{{xff, "[2001:db8:5::1]:443"}}, "ip:2001:db8:5::/64"},
		{"mapped entry", "10.0.0.1:1", [][2]string{{xff, "::ffff:203.0.113.1"}}, "ip:203.0.113.1"},
		{"mapped trusted peer", "[::ffff:10.0.0.1]:1", [][2]string{{xff, "203.0.113.1"}}, "ip:203.0.113.1"},
		{"IPv6 trusted peer", "[2001:db8:ffff::1]:1", [][2]string{{xff, "203.0.113.1"}}, "ip:203.0.113.1"},
		{"garbage before the client", "10.0.0.1:1", [][2]string{{xff, "203.0.113.1, garbage"}}, ""},
		{"garbage after the client is never reached", "10.0.0.1:1", [][2]string{{xff, "garbage, 203.0.113.1"}}, "ip:203.0.113.1"},
		{"empty entry", "10.0.0.1:1", [][2]string{{xff, "203.0.113.1,"}}, ""},
		{"other headers ignored", "10.0.0.1:1", [][2]string{{"X-Real-IP", "203.0.113.1"}, {"Forwarded", "for=203.0.113.2"}}, "ip:10.0.0.1"},
	})
}

func TestClientIPForwarded(t *testing.T) {
	fwd := "Forwarded"
	runIPCases(t, ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8"}, Header: "forwarded"}, []ipCase{
		{"simple", "10.0.0.1:1", [][2]string{{fwd, "for=203.0.113.1"}}, "ip:203.0.113.1"},
		{"case-insensitive name, other pairs", "10.0.0.1:1", [][2]string{{fwd, "proto=https;For=203.0.113.1;by=10.0.0.1"}}, "ip:203.0.113.1"},
		{"quoted IPv6 with port", "10.0.0.1:1", [][2]string{{fwd, `for="[2001:db8:cafe::17]:4711"`}}, "ip:2001:db8:cafe::/64"},
		{"list, right to left", "10.0.0.1:1", [][2]string{{fwd, "for=198.51.100.1, for=203.0.113.1, for=10.0.0.5"}}, "ip:203.0.113.1"},
		{"two lines", "10.0.0.1:1", [][2]string{{fwd, "for=198.51.100.1"}, {fwd, "for=203.0.113.1"}}, "ip:203.0.113.1"},
		{"comma inside quotes", "10.0.0.1:1", [][2]string{{fwd, `for=203.0.113.1;host="a,b"`}}, "ip:203.0.113.1"},
		{"unknown", "10.0.0.1:1", [][2]string{{fwd, "for=unknown"}}, ""},
		{"obfuscated", "10.0.0.1:1", [][2]string{{fwd, "for=_hidden"}}, ""},
		{"element without for", "10.0.0.1:1", [][2]string{{fwd, "proto=http"}}, ""},
		{"malformed", "10.0.0.1:1", [][2]string{{fwd, `for="203.0.113.1`}}, ""},
		{"X-Forwarded-For ignored", "10.0.0.1:1", [][2]string{{"X-Forwarded-For", "203.0.113.9"}}, "ip:10.0.0.1"},
	})
}

func TestClientIPXRealIP(t *testing.T) {
	runIPCases(t, ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8"}, Header: "X-Real-IP", IPv6Prefix: 48}, []ipCase{
		{"set", "10.0.0.1:1", [][2]string{{"X-Real-IP", "203.0.113.1"}}, "ip:203.0.113.1"},
		{"the proxy's is the last line", "10.0.0.1:1", [][2]string{{"X-Real-IP", "198.51.100.1"}, {"X-Real-IP", "203.0.113.1"}}, "ip:203.0.113.1"},
		{"IPv6 grouped by /48", "10.0.0.1:1", [][2]string{{"X-Real-IP", "2001:db8:1:2::1"}}, "ip:2001:db8:1::/48"},
		{"garbage", "10.0.0.1:1", [][2]string{{"X-Real-IP", "203.0.113.1, 198.51.100.1"}}, ""},
		{"untrusted peer", "198.51.100.7:1", [][2]string{{"X-Real-IP", "203.0.113.1"}}, "ip:198.51.100.7"},
	})
}

func TestIPKeyValidation(t *testing.T) {
	tests := []struct {
		cfg  ratelimit.IPKey
		want string
	}{
		{ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8", "10.0.0.0/33"}}, "TrustedProxies[1]"},
		{ratelimit.IPKey{TrustedProxies: []string{"proxy.internal"}}, "TrustedProxies[0]"},
		{ratelimit.IPKey{Header: "True-Client-IP"}, "IPKey.Header"},
		{ratelimit.IPKey{IPv6Prefix: 129}, "IPKey.IPv6Prefix"},
		{ratelimit.IPKey{IPv6Prefix: -1}, "IPKey.IPv6Prefix"},
	}
	for _, tt := range tests {
		_, err := tt.cfg.KeyFunc()
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want ErrInvalid naming %s", tt.cfg, err, tt.want)
		}
	}
	if _, err := (ratelimit.IPKey{TrustedProxies: []string{"10.0.0.1", "::1", "::ffff:10.0.0.0/104"}}).KeyFunc(); err != nil {
		t.Errorf("ClientIP with valid proxies: %v", err)
	}
}

// keyRecorder is a store that admits everything and records the keys it
// is asked about.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (s *keyRecorder) Allow(_ context.Context, key string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	rs := make([]ratelimit.Result, len(limits.All()))
	for i, l := range limits.All() {
		rs[i] = ratelimit.Result{Limit: l, Allowed: true, Remaining: capacity(l) - 1}
	}
	return ratelimit.MakeDecision(rs...), nil
}

func (s *keyRecorder) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return s.Allow(ctx, key, cost, limits)
}

func (s *keyRecorder) Reset(context.Context, string, *ratelimit.Limits) error { return nil }

func (*keyRecorder) End(context.Context, string, int, *ratelimit.Limits, ratelimit.Decision) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, nil
}

// TestSpoofing sends spoofing attempts through the real middleware, behind
// a trusted proxy (10.0.0.0/8) or from a client directly, and checks the
// key each request is counted against.
func TestSpoofing(t *testing.T) {
	key, err := ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48"}}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	xff := "X-Forwarded-For"
	tests := []struct {
		name    string
		remote  string
		headers [][2]string
		want    string // the KeyFunc's key; "" means the request gets 400, uncounted
	}{
		{"forged X-Forwarded-For from an untrusted peer", "203.0.113.7:5000", [][2]string{{xff, "198.51.100.1"}}, "ip:203.0.113.7"},
		{"forged X-Real-IP and Forwarded from an untrusted peer", "203.0.113.7:5000", [][2]string{{"X-Real-IP", "198.51.100.1"}, {"Forwarded", "for=198.51.100.2"}}, "ip:203.0.113.7"},
		{"forged address prepended, through the proxy", "10.0.0.1:80", [][2]string{{xff, "198.51.100.1, 203.0.113.7"}}, "ip:203.0.113.7"},
		{"an untrusted hop in the middle of the chain", "10.0.0.1:80", [][2]string{{xff, "198.51.100.1, 203.0.113.7, 10.0.0.2"}}, "ip:203.0.113.7"},
		{"several X-Forwarded-For lines", "10.0.0.1:80", [][2]string{{xff, "198.51.100.1"}, {xff, "203.0.113.7, 10.0.0.3"}}, "ip:203.0.113.7"},
		{"several lines, forged first line", "10.0.0.1:80", [][2]string{{xff, "10.0.0.99"}, {xff, "203.0.113.7"}}, "ip:203.0.113.7"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.7]:5000", nil, "ip:203.0.113.7"},
		{"IPv4-mapped peer, hex spelling", "[::ffff:cb00:7107]:5000", nil, "ip:203.0.113.7"},
		{"IPv4-mapped peer, full spelling", "[0:0:0:0:0:ffff:203.0.113.7]:5000", nil, "ip:203.0.113.7"},
		{"IPv4-mapped peer, upper case", "[::FFFF:203.0.113.7]:5000", nil, "ip:203.0.113.7"},
		{"IPv4-mapped trusted proxy", "[::ffff:10.0.0.1]:80", [][2]string{{xff, "203.0.113.7"}}, "ip:203.0.113.7"},
		{"IPv4-mapped client in the chain", "10.0.0.1:80", [][2]string{{xff, "::ffff:203.0.113.7"}}, "ip:203.0.113.7"},
		{"client with a port in the chain", "10.0.0.1:80", [][2]string{{xff, "203.0.113.7:4444"}}, "ip:203.0.113.7"},
		{"peer without a port", "203.0.113.7", nil, "ip:203.0.113.7"},
		{"IPv6 peer with a zone", "[2001:db8:1:2::7%eth0]:5000", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 client with a zone in the chain", "10.0.0.1:80", [][2]string{{xff, "2001:db8:1:2::7%eth0"}}, "ip:2001:db8:1:2::/64"},
		{"rotating IPv6 addresses in one /64", "[2001:db8:1:2:dead:beef:0:1]:5000", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 trusted proxy", "[2001:db8:ffff::1]:80", [][2]string{{xff, "2001:db8:1:2::9"}}, "ip:2001:db8:1:2::/64"},
		{"garbage in the chain", "10.0.0.1:80", [][2]string{{xff, "203.0.113.7, <script>"}}, ""},
		{"garbage behind the client is never read", "10.0.0.1:80", [][2]string{{xff, "<script>, 203.0.113.7"}}, "ip:203.0.113.7"},
		{"empty entry", "10.0.0.1:80", [][2]string{{xff, "203.0.113.7,,"}}, ""},
		{"garbage peer", "not-an-address", [][2]string{{xff, "203.0.113.7"}}, ""},
		{"huge header", "10.0.0.1:80", [][2]string{{xff, string(make([]byte, 10000))}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &keyRecorder{}
			l := newLimiter(t, rec, "spoof", ratelimit.WithKey(key), ratelimit.WithLimits(ratelimit.PerMinute(10)), quietLogs())
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, h := range tt.headers {
				r.Header.Add(h[0], h[1])
			}
			w := httptest.NewRecorder()
			l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
			if tt.want == "" {
				if w.Code != http.StatusBadRequest || len(rec.keys) != 0 {
					t.Fatalf("got status %d and keys %q, want 400 and no key", w.Code, rec.keys)
				}
				return
			}
			if want := "spoof|*|" + tt.want; w.Code != http.StatusOK || len(rec.keys) != 1 || rec.keys[0] != want {
				t.Fatalf("got status %d and keys %q, want 200 and %q", w.Code, rec.keys, want)
			}
		})
	}
}

// TestDefaultKeyIsThePeer: a Limiter without WithKey counts requests
// against the connection's peer, whatever headers claim.
func TestDefaultKeyIsThePeer(t *testing.T) {
	rec := &keyRecorder{}
	l := newLimiter(t, rec, "test", ratelimit.WithLimits(ratelimit.PerMinute(10)))
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve(h, "GET", "/", withHeader("X-Forwarded-For", "198.51.100.1"), withHeader("X-Real-IP", "198.51.100.2"))
	serve(h, "GET", "/", func(r *http.Request) { r.RemoteAddr = "[2001:db8:1:2::7]:443" })
	want := []string{"test|*|ip:192.0.2.1", "test|*|ip:2001:db8:1:2::/64"}
	if len(rec.keys) != 2 || rec.keys[0] != want[0] || rec.keys[1] != want[1] {
		t.Errorf("got keys %q, want %q", rec.keys, want)
	}
}

// Fuzz targets of the parts that read what clients send. Run one with,
// for example, go test -run '^$' -fuzz '^FuzzClientIP$' -fuzztime 30s .
// Seeds are in testdata/fuzz/<target> and in the f.Add calls.

// fuzzTrusted are the proxies of FuzzClientIP's KeyFuncs.
var fuzzTrusted = []string{"10.0.0.0/8", "2001:db8::/32", "::ffff:192.168.0.0/112"}

var fuzzIPKeys = func() map[string]ratelimit.KeyFunc {
	keys := map[string]ratelimit.KeyFunc{}
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"} {
		k, err := ratelimit.IPKey{TrustedProxies: fuzzTrusted, Header: h}.KeyFunc()
		if err != nil {
			panic(err)
		}
		keys[h] = k
	}
	return keys
}()

// peerKey keys requests by their peer alone.
var peerKey, _ = ratelimit.IPKey{}.KeyFunc()

// trustedPeer reports whether the peer of r is one of fuzzTrusted, judged
// from its key ("ip:" and an IPv4 address or an IPv6 /64, which lies in
// 2001:db8::/32 exactly when the address does).
func trustedPeer(r *http.Request) bool {
	k, err := peerKey(r)
	if err != nil {
		return false
	}
	rest := strings.TrimPrefix(k, "ip:")
	if a, err := netip.ParseAddr(rest); err == nil {
		return netip.MustParsePrefix("10.0.0.0/8").Contains(a) || netip.MustParsePrefix("192.168.0.0/16").Contains(a)
	}
	p, err := netip.ParsePrefix(rest)
	return err == nil && netip.MustParsePrefix("2001:db8::/32").Contains(p.Addr())
}

// FuzzClientIP feeds arbitrary peers and forwarding headers, over several
// lines, to the client-IP KeyFunc of each header. It must not panic; a key
// must be "ip:" and an IPv4 address or an IPv6 /64 prefix; a failure must
// be ErrInvalid; and when the peer is not a trusted proxy the headers must
// change nothing.
func FuzzClientIP(f *testing.F) {
	f.Add("192.0.2.1:1234", "203.0.113.9", "", "for=203.0.113.9", "203.0.113.9")
	f.Add("10.0.0.1:1", "1.1.1.1, 203.0.113.1, 10.0.0.7", "198.51.100.2", `for="[2001:db8:cafe::17]:4711"`, "::ffff:203.0.113.1")
	f.Add("[::ffff:10.1.2.3]:80", "garbage, 10.0.0.2", "203.0.113.2,", "for=unknown;proto=http", "")
	f.Add("[fe80::1%eth0]:80", "[2001:db8:5::1]:443", "2001:db8::1%eth0", `for="a,b";by=x, for=_hidden`, "10.0.0.9")
	f.Add("@", "", "", "", "")
	f.Fuzz(func(t *testing.T, remote, xff1, xff2, forwarded, realIP string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Add("X-Forwarded-For", xff1)
		r.Header.Add("X-Forwarded-For", xff2)
		r.Header.Add("Forwarded", forwarded)
		r.Header.Add("X-Real-Ip", realIP)
		bare := httptest.NewRequest("GET", "/", nil)
		bare.RemoteAddr = remote
		trusted := trustedPeer(bare)
		// The default KeyFunc's store key, built in one piece, is the one
		// built from its key.
		one, err1, two, err2 := ratelimit.DefaultStoreKeys(r, "fuzz|GET /x|")
		if one != two || (err1 == nil) != (err2 == nil) {
			t.Fatalf("remote %q: store key in one piece %q (%v), from the key %q (%v)", remote, one, err1, two, err2)
		}
		for h, key := range fuzzIPKeys {
			got, err := key(r)
			if err != nil {
				if !errors.Is(err, ratelimit.ErrInvalid) {
					t.Fatalf("%s: error %v does not wrap ErrInvalid", h, err)
				}
			} else if !validIPKey(got) {
				t.Fatalf("%s: key %q is not ip: and an IPv4 address or IPv6 /64", h, got)
			}
			if trusted {
				continue // its headers count
			}
			want, werr := key(bare)
			if got != want || (err == nil) != (werr == nil) {
				t.Fatalf("%s: untrusted peer %q: forwarding headers changed the key from %q (%v) to %q (%v)", h, remote, want, werr, got, err)
			}
		}
	})
}

func validIPKey(k string) bool {
	rest, ok := strings.CutPrefix(k, "ip:")
	if !ok {
		return false
	}
	if a, err := netip.ParseAddr(rest); err == nil {
		return a.Is4()
	}
	p, err := netip.ParsePrefix(rest)
	return err == nil && p.Bits() == 64 && p.Addr().Is6() && !p.Addr().Is4In6() && p == p.Masked()
}

// TestMalformedAddressesStayOutOfLogs: a request whose forwarding header
// or peer is not an address is logged at WARN, and the log names the
// header without quoting what the client sent.
func TestMalformedAddressesStayOutOfLogs(t *testing.T) {
	key, err := ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, remote, forwarded, secret string
	}{
		{"forwarded entry", "10.0.0.1:1234", "192.0.2.1, evil-4f2a9c", "evil-4f2a9c"},
		{"peer", "peer-4f2a9c", "", "peer-4f2a9c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l, err := ratelimit.New(s, "logs", ratelimit.WithKey(key), ratelimit.WithLimits(ratelimit.PerMinute(5)),
				ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			if tt.forwarded != "" {
				r.Header.Set("X-Forwarded-For", tt.forwarded)
			}
			w := httptest.NewRecorder()
			l.Handler(http.NotFoundHandler()).ServeHTTP(w, r)
			if w.Code != http.StatusBadRequest {
				t.Errorf("got status %d, want 400", w.Code)
			}
			if line := logs.String(); !strings.Contains(line, "level=WARN") || strings.Contains(line, tt.secret) {
				t.Errorf("log %q: want a WARN line without %q", line, tt.secret)
			}
		})
	}
}

// BenchmarkHeader is the cost of keying a request by an API key: the
// HMAC-SHA256 of the header's value.
func BenchmarkHeader(b *testing.B) {
	key, err := ratelimit.HeaderKey("X-API-Key", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "sk_live_0123456789abcdefghij")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := key(r); err != nil {
			b.Fatal(err)
		}
	}
}
