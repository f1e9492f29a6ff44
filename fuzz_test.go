package ratelimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// Fuzz targets of the parts that read what clients send. Run one with,
// for example, go test -run '^$' -fuzz '^FuzzClientIP$' -fuzztime 30s .
// Seeds are in testdata/fuzz/<target> and in the f.Add calls.

var fuzzIPKeys = func() map[string]KeyFunc {
	keys := map[string]KeyFunc{}
	trusted := []string{"10.0.0.0/8", "2001:db8::/32", "::ffff:192.168.0.0/112"}
	for _, h := range []string{HeaderXForwardedFor, HeaderForwarded, HeaderXRealIP} {
		k, err := IPKey{TrustedProxies: trusted, Header: h}.KeyFunc()
		if err != nil {
			panic(err)
		}
		keys[h] = k
	}
	return keys
}()

// FuzzClientIP feeds arbitrary peers and forwarding headers, over several
// lines, to the client-IP KeyFunc of each header. It must not panic; a key
// must be "ip:" and an IPv4 address or an IPv6 /64 prefix; a failure must
// be ErrNoKey; and when the peer is not a trusted proxy the headers must
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
		for h, key := range fuzzIPKeys {
			got, err := key(r)
			if err != nil {
				if !errors.Is(err, ErrNoKey) {
					t.Fatalf("%s: error %v does not wrap ErrNoKey", h, err)
				}
			} else if !validIPKey(got) {
				t.Fatalf("%s: key %q is not ip: and an IPv4 address or IPv6 /64", h, got)
			}
			peer, ok := parseAddr(remote)
			if ok && (peer.Is4() && peer.As4()[0] == 10 || netip.MustParsePrefix("2001:db8::/32").Contains(peer) || netip.MustParsePrefix("192.168.0.0/16").Contains(peer)) {
				continue // a trusted peer: its headers count
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

// FuzzJoin checks that Join never gives two different pairs of keys the
// same joined key.
func FuzzJoin(f *testing.F) {
	f.Add("ab", "c", "a", "bc")
	f.Add("1:a", "", "", "1:a")
	f.Add("ip:1.2.3.4", "header:X:k", "ip:1.2.3.4header:X:k", "")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		join := func(x, y string) string {
			k, err := Join(constKey(x), constKey(y))(httptest.NewRequest("GET", "/", nil))
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

func constKey(s string) KeyFunc {
	return func(*http.Request) (string, error) { return s, nil }
}

// FuzzStoreKey checks that the key the store sees is printable ASCII,
// bounded, and one-to-one.
func FuzzStoreKey(f *testing.F) {
	f.Add("ip:192.0.2.1", "ip:192.0.2.1%")
	f.Add("header:X-Api-Key:\x00\r\nSET x y", "header:X-Api-Key:%00%0D%0ASET x y")
	f.Add(strings.Repeat("k", 300), strings.Repeat("k", 201))
	f.Add("%sha256:00", "é")
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, kb := storeKey(a), storeKey(b)
		for _, k := range []string{ka, kb} {
			if len(k) > max(maxKeyPart, len("%sha256:")+64) {
				t.Fatalf("key %q is %d bytes long", k, len(k))
			}
			for i := 0; i < len(k); i++ {
				if k[i] < 0x20 || k[i] >= 0x7f {
					t.Fatalf("key %q holds byte %#x", k, k[i])
				}
			}
		}
		if (ka == kb) != (a == b) {
			t.Fatalf("storeKey(%q) = %q, storeKey(%q) = %q", a, ka, b, kb)
		}
	})
}
