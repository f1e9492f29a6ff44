package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/clusterslot"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"ip:192.0.2.1", "ip:192.0.2.1"},
		{" ~!\"#$&'()*+,-./:;<=>?@[\\]^_`|", " ~!\"#$&'()*+,-./:;<=>?@[\\]^_`|"}, // printable ASCII but '%', '{', '}'
		{"%", "%25"},
		{"a%25", "a%2525"},
		{"{id}", "%7Bid%7D"},
		{"\x00", "%00"},
		{"a\r\nb", "a%0D%0Ab"},
		{"\x1f\x20", "%1F "},
		{"\x7e\x7f", "~%7F"},
		{"café", "caf%C3%A9"},
		{"\xff\x80", "%FF%80"}, // not UTF-8: escaped byte by byte
	}
	for _, tt := range tests {
		if got := escape(tt.in); got != tt.want {
			t.Errorf("escape(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestScopeOf(t *testing.T) {
	long := "GET /" + strings.Repeat("a", maxScope-5)
	tests := []struct{ pattern, want string }{
		{"", "*"},
		{"POST /login", "POST /login"},
		{"GET /users/{id}", "GET /users/%7Bid%7D"},
		{"GET /café/", "GET /caf%C3%A9/"},
		{"/100%/", "/100%25/"},
		{long, long}, // exactly maxScope: kept
		{long + "b", "#" + sha256Hex(long + "b")[:32]},
		// Short, but long once escaped; the hash is of the pattern itself.
		{"/" + strings.Repeat("é", 30), "#" + sha256Hex("/" + strings.Repeat("é", 30))[:32]},
	}
	for _, tt := range tests {
		if got := scopeOf(tt.pattern); got != tt.want {
			t.Errorf("scopeOf(%q): got %q, want %q", tt.pattern, got, tt.want)
		}
	}
}

func TestClientKey(t *testing.T) {
	long := strings.Repeat("k", maxClientKey)
	tests := []struct{ key, want string }{
		{"ip:192.0.2.1", "ip:192.0.2.1"},
		{"user:a%b", "user:a%25b"},
		{"header:X:\x00\r\nSET x y", "header:X:%00%0D%0ASET x y"},
		{long, long}, // exactly maxClientKey: kept
		{long + "k", "%sha256:" + sha256Hex(long+"k")},
		// Short, but long once escaped; the hash is of the key itself.
		{strings.Repeat("\x00", 67), "%sha256:" + sha256Hex(strings.Repeat("\x00", 67))},
		{strings.Repeat("\x00", 66), strings.Repeat("%00", 66)},
	}
	for _, tt := range tests {
		if got := clientKey(tt.key); got != tt.want {
			t.Errorf("clientKey(%q): got %q, want %q", tt.key, got, tt.want)
		}
	}
}

// TestStoreKeysAreDistinct: inputs that could be confused never give the
// same scope or client key.
func TestStoreKeysAreDistinct(t *testing.T) {
	long := strings.Repeat("k", maxClientKey+1)
	hashed := clientKey(long)
	clients := [][2]string{
		{"a%", "a%25"},
		{"a\x00", "a%00"},
		{"a{", "a%7B"},
		{long, hashed},     // a short key spelled like a long one's hash
		{long, long + "k"}, // two long keys
		{long, long[:maxClientKey]},
	}
	for _, p := range clients {
		if a, b := clientKey(p[0]), clientKey(p[1]); a == b {
			t.Errorf("clientKey(%q) = clientKey(%q) = %q", p[0], p[1], a)
		}
	}
	// Every pattern ServeMux accepts holds a '/' (WithRoutes refuses the
	// others), and neither "*" nor a hashed scope does.
	longPattern := "/" + strings.Repeat("p", maxScope)
	patterns := [][2]string{
		{"/a%", "/a%25"},
		{"/a\n", "/a%0A"},
		{"/{id}", "/%7Bid%7D"},
		{longPattern, longPattern + "p"},
		{longPattern, longPattern[:maxScope]},
		{"", "/"},
	}
	for _, p := range patterns {
		if a, b := scopeOf(p[0]), scopeOf(p[1]); a == b {
			t.Errorf("scopeOf(%q) = scopeOf(%q) = %q", p[0], p[1], a)
		}
	}
	for _, s := range []string{scopeOf(""), scopeOf(longPattern)} {
		if strings.Contains(s, "/") {
			t.Errorf("scope %q holds a '/', so a pattern could have it", s)
		}
	}
}

func TestPolicyStoreKey(t *testing.T) {
	limits := []Limit{PerMinute(1)}
	tests := []struct {
		pattern, key, want string
	}{
		{"", "ip:192.0.2.1", "api|*|ip:192.0.2.1"},
		{"POST /login", "ip:192.0.2.1", "api|POST /login|ip:192.0.2.1"},
		{"GET /users/{id}", "user:{x}|y", "api|GET /users/%7Bid%7D|user:%7Bx%7D|y"},
	}
	for _, tt := range tests {
		p, problem := policyBase{namespace: "api"}.newPolicy(tt.pattern, limits)
		if problem != "" {
			t.Fatal(problem)
		}
		if got := p.prefix + clientKey(tt.key); got != tt.want {
			t.Errorf("pattern %q, key %q: got %q, want %q", tt.pattern, tt.key, got, tt.want)
		}
	}
}

// TestStoreKeysSpreadOverSlots: the clients of a route whose pattern holds
// braces land in many Redis Cluster slots, not in the one a brace in the
// hash tag would give them all.
func TestStoreKeysSpreadOverSlots(t *testing.T) {
	p, problem := policyBase{namespace: "api"}.newPolicy("GET /users/{id}", []Limit{PerMinute(1)})
	if problem != "" {
		t.Fatal(problem)
	}
	slots := map[int]bool{}
	for i := range 100 {
		key := p.prefix + clientKey("user:"+strings.Repeat("x", i))
		slots[clusterslot.Of("rl:{"+key+"}:f60000")] = true
	}
	if len(slots) < 50 {
		t.Errorf("100 clients of one route fell in %d slots, want them spread", len(slots))
	}
}

// FuzzStoreKey checks that the client key the store sees is printable
// ASCII without braces, bounded, and one-to-one.
func FuzzStoreKey(f *testing.F) {
	f.Add("ip:192.0.2.1", "ip:192.0.2.1%")
	f.Add("header:X-Api-Key:\x00\r\nSET x y", "header:X-Api-Key:%00%0D%0ASET x y")
	f.Add(strings.Repeat("k", 300), strings.Repeat("k", 201))
	f.Add("%sha256:00", "é")
	f.Add("user:{x}", "user:%7Bx%7D")
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, kb := clientKey(a), clientKey(b)
		for _, k := range []string{ka, kb} {
			if len(k) > max(maxClientKey, len("%sha256:")+64) {
				t.Fatalf("key %q is %d bytes long", k, len(k))
			}
			for i := 0; i < len(k); i++ {
				if k[i] < 0x20 || k[i] >= 0x7f || k[i] == '{' || k[i] == '}' {
					t.Fatalf("key %q holds byte %#x", k, k[i])
				}
			}
		}
		if (ka == kb) != (a == b) {
			t.Fatalf("clientKey(%q) = %q, clientKey(%q) = %q", a, ka, b, kb)
		}
	})
}
