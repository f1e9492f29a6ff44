package ratelimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Forwarding headers IPKey can read, in canonical form.
const (
	headerXForwardedFor = "X-Forwarded-For"
	headerForwarded     = "Forwarded"
	headerXRealIP       = "X-Real-Ip"
)

// IPKey configures a KeyFunc that keys requests by client IP address; see
// [IPKey.KeyFunc]. The zero IPKey trusts no proxy: the key is the address
// of the connection's peer, which a client cannot forge.
type IPKey struct {
	// TrustedProxies lists the proxies whose forwarding header is believed,
	// as CIDRs ("10.0.0.0/8", "fd00::/8") or single addresses. Empty means
	// none.
	TrustedProxies []string

	// Header is the one forwarding header the trusted proxies set:
	// "X-Forwarded-For" (the default), "Forwarded" (RFC 7239) or
	// "X-Real-IP". The others are ignored, since a proxy that passes a
	// header along unchanged would let a client forge it.
	Header string

	// IPv6Prefix is how many leading bits of an IPv6 address identify one
	// client; a single user commonly holds a whole /64 and can rotate
	// through it. From 1 to 128; zero means 64.
	IPv6Prefix int
}

// ClientIP returns a KeyFunc keying requests by client IP, believing the
// X-Forwarded-For header of trustedProxies; see [IPKey].
func ClientIP(trustedProxies ...string) (KeyFunc, error) {
	return IPKey{TrustedProxies: trustedProxies}.KeyFunc()
}

// remoteIP keys requests by the address of the connection's peer, IPv6
// addresses grouped by /64: the KeyFunc of the zero IPKey, a Limiter's
// default. A Limiter that keeps it builds the store's key with
// remoteKeyer.storeKey, in one piece.
var (
	remoteKeyer         = &ipKeyer{header: headerXForwardedFor, bits: 64}
	remoteIP    KeyFunc = remoteKeyer.key
)

// KeyFunc validates c and returns its KeyFunc. The key is "ip:" and the
// client's address: IPv4 as is (IPv4-mapped IPv6 counts as IPv4), IPv6 as
// its prefix ("ip:2001:db8:1:2::/64"); ports and zones are dropped.
//
// The client is the connection's peer unless the peer is a trusted proxy.
// Then the forwarding header is read right to left (all its lines, in
// order), skipping trusted proxies: the first untrusted address is the
// client. If every address is trusted, the leftmost is the client; with no
// header, the peer is. An entry that is not an IP address (garbage, or
// RFC 7239's "unknown" and obfuscated names) met before the client ends the
// search with [ErrNoKey]: the request goes to the error handler rather
// than share a bucket with others.
func (c IPKey) KeyFunc() (KeyFunc, error) {
	k := &ipKeyer{header: headerXForwardedFor, bits: 64}
	for i, s := range c.TrustedProxies {
		p, err := parseTrusted(s)
		if err != nil {
			return nil, fmt.Errorf("%w: IPKey.TrustedProxies[%d]: %q is not a CIDR or an IP address", ErrInvalid, i, s)
		}
		k.trusted = append(k.trusted, p)
	}
	switch h := http.CanonicalHeaderKey(c.Header); h {
	case "":
	case headerXForwardedFor, headerForwarded, headerXRealIP:
		k.header = h
	default:
		return nil, fmt.Errorf("%w: IPKey.Header must be X-Forwarded-For, Forwarded or X-Real-IP, got %q", ErrInvalid, c.Header)
	}
	switch {
	case c.IPv6Prefix == 0:
	case c.IPv6Prefix < 1 || c.IPv6Prefix > 128:
		return nil, fmt.Errorf("%w: IPKey.IPv6Prefix must be from 1 to 128, got %d", ErrInvalid, c.IPv6Prefix)
	default:
		k.bits = c.IPv6Prefix
	}
	return k.key, nil
}

// parseTrusted parses a CIDR or a single address into a prefix, IPv4 in
// IPv4 form.
func parseTrusted(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

type ipKeyer struct {
	trusted []netip.Prefix
	header  string
	bits    int
}

func (k *ipKeyer) isTrusted(a netip.Addr) bool {
	for _, p := range k.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (k *ipKeyer) key(r *http.Request) (string, error) {
	client, err := k.client(r)
	if err != nil {
		return "", err
	}
	return string(k.appendKey(make([]byte, 0, 48), client)), nil
}

// storeKey returns the store's key of r under a policy whose keys start
// with prefix: what the policy's storeKey makes of k.key(r), built in one
// allocation instead of two. A key of k's needs no escaping, and is short.
func (k *ipKeyer) storeKey(r *http.Request, prefix string) (string, error) {
	client, err := k.client(r)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 0, 192)
	buf = append(buf, prefix...)
	return string(k.appendKey(buf, client)), nil
}

// client returns r's client address, IPv6 masked to k's prefix.
func (k *ipKeyer) client(r *http.Request) (netip.Addr, error) {
	client, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%w: RemoteAddr is not an IP address", ErrNoKey)
	}
	if len(k.trusted) > 0 && k.isTrusted(client) {
		var err error
		if client, err = k.forwarded(r, client); err != nil {
			return netip.Addr{}, err
		}
	}
	if !client.Is4() {
		client = netip.PrefixFrom(client, k.bits).Masked().Addr()
	}
	return client, nil
}

// appendKey appends the key of a client address (IPv6 already masked).
func (k *ipKeyer) appendKey(buf []byte, a netip.Addr) []byte {
	buf = append(buf, "ip:"...)
	if a.Is4() {
		return a.AppendTo(buf)
	}
	buf, _ = netip.PrefixFrom(a, k.bits).AppendText(buf)
	return buf
}

// forwarded finds the client in the forwarding header of a trusted peer.
func (k *ipKeyer) forwarded(r *http.Request, peer netip.Addr) (netip.Addr, error) {
	lines := r.Header.Values(k.header)
	if len(lines) == 0 {
		return peer, nil
	}
	if k.header == headerXRealIP {
		v := lines[len(lines)-1] // a proxy that adds rather than sets puts its own last
		a, ok := parseAddr(v)
		if !ok {
			return netip.Addr{}, fmt.Errorf("%w: %s is not an IP address", ErrNoKey, k.header)
		}
		return a, nil
	}
	var hops []string
	for _, line := range lines {
		if k.header == headerForwarded {
			hops = appendForwardedFor(hops, line)
		} else {
			for hop := range strings.SplitSeq(line, ",") {
				hops = append(hops, hop)
			}
		}
	}
	var client netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseAddr(hops[i])
		if !ok {
			return netip.Addr{}, fmt.Errorf("%w: %s entry %d of %d, counted from the right, is not an IP address", ErrNoKey, k.header, len(hops)-i, len(hops))
		}
		client = a
		if !k.isTrusted(a) {
			break
		}
	}
	return client, nil
}

// parseAddr parses an address as it appears in RemoteAddr or a forwarding
// header: "192.0.2.1", "192.0.2.1:8080", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:8080", with optional zone. IPv4-mapped IPv6 becomes IPv4;
// the zone is dropped.
func parseAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a = ap.Addr()
	} else {
		if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
			s = s[1 : len(s)-1]
		}
		var err error
		if a, err = netip.ParseAddr(s); err != nil {
			return netip.Addr{}, false
		}
	}
	return a.Unmap().WithZone(""), true
}

// appendForwardedFor appends the for= value of each element of an RFC 7239
// Forwarded header line, unquoted, to hops. An element without for= adds
// an empty hop, which does not parse as an address.
func appendForwardedFor(hops []string, line string) []string {
	for _, element := range splitQuoted(line, ',') {
		v := ""
		for _, pair := range splitQuoted(element, ';') {
			name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if ok && strings.EqualFold(name, "for") {
				v = unquote(value)
				break
			}
		}
		hops = append(hops, v)
	}
	return hops
}

// splitQuoted splits s at sep outside double-quoted strings.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote undoes an RFC 9110 quoted-string; other values pass unchanged.
func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
