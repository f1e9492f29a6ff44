package ratelimit_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/ratelimit-go/ratelimit"
)

func quietLogs() ratelimit.Option { return ratelimit.WithLogger(slog.New(slog.DiscardHandler)) }

// keyRecorder is a store that admits everything and records the keys it
// is asked about.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (s *keyRecorder) Allow(_ context.Context, key string, _ int, limits ...ratelimit.Limit) (ratelimit.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	d := ratelimit.Decision{Allowed: true, Results: make([]ratelimit.Result, len(limits))}
	for i, l := range limits {
		d.Results[i] = ratelimit.Result{Limit: l, Allowed: true, Remaining: l.Capacity() - 1}
	}
	return d, nil
}

// TestSpoofing sends spoofing attempts through the real middleware, behind
// a trusted proxy (10.0.0.0/8) or from a client directly, and checks the
// key each request is counted against.
func TestSpoofing(t *testing.T) {
	key, err := ratelimit.ClientIP("10.0.0.0/8", "2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	xff := "X-Forwarded-For"
	tests := []struct {
		name    string
		remote  string
		headers [][2]string
		want    string // the key; "" means the request gets 400, uncounted
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
			l, err := ratelimit.New(rec, ratelimit.WithKey(key), ratelimit.WithLimits(ratelimit.PerMinute(10)), quietLogs())
			if err != nil {
				t.Fatal(err)
			}
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
			if w.Code != http.StatusOK || len(rec.keys) != 1 || rec.keys[0] != tt.want {
				t.Fatalf("got status %d and keys %q, want 200 and %q", w.Code, rec.keys, tt.want)
			}
		})
	}
}
