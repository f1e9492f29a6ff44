package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
)

type ipCase struct {
	name    string
	remote  string
	headers [][2]string // in order; a name may repeat
	want    string      // "" means ErrNoKey
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
			if tt.want == "" {
				if !errors.Is(err, ratelimit.ErrNoKey) {
					t.Fatalf("got (%q, %v), want ErrNoKey", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got (%q, %v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestRemoteIP(t *testing.T) {
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
	if _, err := ratelimit.ClientIP("10.0.0.1", "::1", "::ffff:10.0.0.0/104"); err != nil {
		t.Errorf("ClientIP with valid proxies: %v", err)
	}
}

type userKey struct{}

type userID int

func (u userID) String() string { return "u" + string(rune('0'+int(u))) }

func TestKeyFuncs(t *testing.T) {
	req := func(mod func(*http.Request) *http.Request) *http.Request {
		r := httptest.NewRequest("POST", "/login?x=1", nil)
		return mod(r)
	}
	tests := []struct {
		name string
		key  ratelimit.KeyFunc
		r    *http.Request
		want string // "" means ErrNoKey
	}{
		{"header", ratelimit.Header("x-api-key"), req(func(r *http.Request) *http.Request { r.Header.Set("X-API-Key", "k1"); return r }), "header:X-Api-Key:k1"},
		{"header missing", ratelimit.Header("X-API-Key"), req(func(r *http.Request) *http.Request { return r }), ""},
		{"header empty", ratelimit.Header("X-API-Key"), req(func(r *http.Request) *http.Request { r.Header.Set("X-API-Key", ""); return r }), ""},
		{"header first line", ratelimit.Header("X-API-Key"), req(func(r *http.Request) *http.Request {
			r.Header.Add("X-API-Key", "a")
			r.Header.Add("X-API-Key", "b")
			return r
		}), "header:X-Api-Key:a"},
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
		{"route from an adapter", ratelimit.Route, req(func(r *http.Request) *http.Request { return ratelimit.RequestWithRoute(r, "/users/:id") }), "route:POST /users/:id"},
		{"no route: never the raw path", ratelimit.Route, req(func(r *http.Request) *http.Request { return r }), ""},
		{"join", ratelimit.Join(ratelimit.Route, ratelimit.Header("X-API-Key")), req(func(r *http.Request) *http.Request {
			r.Pattern = "POST /login"
			r.Header.Set("X-API-Key", "k1")
			return r
		}), "17:route:POST /login19:header:X-Api-Key:k1"},
		{"join fails with a part", ratelimit.Join(ratelimit.Route, ratelimit.Header("X-API-Key")), req(func(r *http.Request) *http.Request { r.Pattern = "/x"; return r }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.key(tt.r)
			if tt.want == "" {
				if !errors.Is(err, ratelimit.ErrNoKey) {
					t.Fatalf("got (%q, %v), want ErrNoKey", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got (%q, %v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestJoinIsUnambiguous: parts that concatenate alike still join apart.
func TestJoinIsUnambiguous(t *testing.T) {
	constant := func(s string) ratelimit.KeyFunc {
		return func(*http.Request) (string, error) { return s, nil }
	}
	r := httptest.NewRequest("GET", "/", nil)
	seen := map[string][2]string{}
	for _, parts := range [][2]string{{"ab", "c"}, {"a", "bc"}, {"a:", "b"}, {"a", ":b"}, {"1:a", ""}, {"", "1:a"}, {"2:ab", "1:c"}} {
		k, _ := ratelimit.Join(constant(parts[0]), constant(parts[1]))(r)
		if prev, ok := seen[k]; ok {
			t.Errorf("Join(%q, %q) = Join(%q, %q) = %q", parts[0], parts[1], prev[0], prev[1], k)
		}
		seen[k] = parts
	}
}
