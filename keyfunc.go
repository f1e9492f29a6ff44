package ratelimit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A KeyFunc names who a request is counted against: a client address, an
// API key, a user, a route. It is called for every request, concurrently,
// so it must be safe for concurrent use (the built-in ones are). It
// returns an error wrapping [ErrInvalid] when the request carries no key;
// the limiter then hands the request to its error handler, never to a
// shared bucket, and logs the error. The 400 of [FailOpen] and
// [FailClosed] tells the client what a built-in KeyFunc found missing,
// never the error of another KeyFunc, which could quote anything.
//
// The built-in KeyFuncs tag their keys ("ip:", "header:", "user:",
// "route:"), so keys of different kinds never collide. A Limiter puts its
// namespace and the route's pattern before the key, so a KeyFunc need
// not. Keys are written to the store: a KeyFunc that reads a secret
// should return a keyed hash of it, as [HeaderKey] does. See docs/keys.md.
type KeyFunc func(r Request) (string, error)

// requestError is a KeyFunc's error that the client may be told of: what
// its request lacks, in words of the server's own (a header's name, never
// a value the request carries). [FailOpen] and [FailClosed] put detail in
// the 400; any other error gets the generic answer. It wraps ErrInvalid.
type requestError struct {
	detail string // for the client: "header X-Api-Key is missing"
	more   string // for the log only, after detail; "" when none
	field  string // the field at fault, as Request.Header names it: "X-Api-Key"
}

// missingField returns the field err, a key function's error, says is
// missing or empty, "" when it names none.
func missingField(err error) string {
	var re *requestError
	if errors.As(err, &re) {
		return re.field
	}
	return ""
}

func (e *requestError) Error() string { return ErrInvalid.Error() + ": " + e.detail + e.more }

func (e *requestError) Unwrap() error { return ErrInvalid }

// minSecret is the shortest secret HeaderKey and Headers.PartitionKey
// take.
const minSecret = 16

// HeaderKey keys requests by the value of the named header, such as an API
// key or a token: an HTTP header, or a gRPC call's metadata of the same
// name in lower case ("x-api-key"), so that a client counts alike over
// both. A request without it, or with it empty, has no key. When the
// header appears more than once, the first value counts, as for
// [http.Header.Get].
//
// The key holds not the value but 128 bits of its HMAC-SHA256 under
// secret, so that the store and logs never show an API key. The secret is
// at least 16 bytes and the same on every instance, or they would not
// share counters; changing it starts every counter afresh. See
// docs/keys.md.
func HeaderKey(name string, secret []byte) (KeyFunc, error) {
	if len(secret) < minSecret {
		return nil, fmt.Errorf("%w: HeaderKey(%q): the secret is %d bytes long; at least %d are needed, the same on every instance", ErrInvalid, name, len(secret), minSecret)
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
	tag := "header:" + name + ":"
	macs := newHMACs(secret)
	return func(r Request) (string, error) {
		v, ok := firstValue(r, name)
		if v == "" {
			if ok {
				return "", &requestError{detail: "header " + name + " is empty", field: name}
			}
			return "", &requestError{detail: "header " + name + " is missing", field: name}
		}
		sum := macs.sum16(v)
		var buf [128]byte
		k := append(buf[:0], tag...)
		k = hex.AppendEncode(k, sum[:])
		return string(k), nil
	}, nil
}

// hmacs are HMAC-SHA256s under one secret, pooled.
type hmacs struct{ pool sync.Pool }

func newHMACs(secret []byte) *hmacs {
	secret = bytes.Clone(secret)
	return &hmacs{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}}
}

// sum16 returns the first 16 bytes of the HMAC of v.
func (m *hmacs) sum16(v string) (out [16]byte) {
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(v))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	m.pool.Put(h)
	copy(out[:], sum[:])
	return out
}

// User keys requests by a value that earlier middleware, typically
// authentication, stored in the request's context under ctxKey. The value
// must be a non-empty string or implement [fmt.Stringer].
func User(ctxKey any) KeyFunc {
	return func(r Request) (string, error) {
		var id string
		switch v := r.Context().Value(ctxKey).(type) {
		case string:
			id = v
		case fmt.Stringer:
			id = v.String()
		}
		if id == "" {
			return "", fmt.Errorf("%w: no user in the request context", ErrInvalid)
		}
		return "user:" + id, nil
	}
}

// Route keys requests by what they ask (see [Request]), for example
// "route:POST /login" or a gRPC call's "route:/shop.Orders/Create", so
// that each route has its own counter. Over HTTP the pattern is
// [http.Request.Pattern]: the one Go's ServeMux matched (the limiter
// must then run inside the mux, around a route's handler), the one a
// framework adapter sets, or the one the Limiter's own route table
// matched (see [WithRoutes]). The raw URL path is never used: it would let
// clients mint keys at will.
func Route(r Request) (string, error) {
	p := routeOf(r)
	if p == "" {
		return "", fmt.Errorf("%w: no route pattern (run the limiter inside the router, or through an adapter)", ErrInvalid)
	}
	return "route:" + p, nil
}

// Join keys requests by all of keys together, for example an API key per
// route. Each part is prefixed with its length, so different parts can
// never join into the same key. If any part fails, Join fails.
func Join(keys ...KeyFunc) KeyFunc {
	return func(r Request) (string, error) {
		var b strings.Builder
		for _, key := range keys {
			k, err := key(r)
			if err != nil {
				return "", err
			}
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
		}
		return b.String(), nil
	}
}

// Forwarding headers IPKey can read, in canonical form.
const (
	headerXForwardedFor = "X-Forwarded-For"
	headerForwarded     = "Forwarded"
	headerXRealIP       = "X-Real-Ip"
)

// IPKey configures a KeyFunc that keys requests by client IP address; see
// [IPKey.KeyFunc]. The zero IPKey trusts no proxy: the key is the address
// of the connection's peer, which a client cannot forge; it is a
// Limiter's default. Behind proxies:
//
//	key, err := ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
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

// peerKeyer keys requests by the address of the connection's peer, IPv6
// addresses grouped by /64: the zero IPKey's, a Limiter's default key,
// which storeKey appends to the store's key in place.
var peerKeyer = &ipKeyer{header: headerXForwardedFor, bits: 64}

// KeyFunc validates c and returns its KeyFunc. The key is "ip:" and the
// client's address: IPv4 as is (IPv4-mapped IPv6 counts as IPv4), IPv6 as
// its prefix ("ip:2001:db8:1:2::/64"); ports and zones are dropped.
//
// The client is the connection's peer unless the peer is a trusted proxy.
// Then the forwarding header is read right to left, skipping trusted
// proxies: the first untrusted address is the client (the leftmost if
// all are trusted; the peer with no header). An entry that is not an IP
// address met before the client sends the request to the error handler
// ([ErrInvalid]). See docs/keys.md.
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
	return slices.ContainsFunc(k.trusted, func(p netip.Prefix) bool { return p.Contains(a) })
}

func (k *ipKeyer) key(r Request) (string, error) {
	client, err := k.client(r)
	if err != nil {
		return "", err
	}
	return string(k.appendKey(make([]byte, 0, 48), client)), nil
}

// client returns r's client address, IPv6 masked to k's prefix.
func (k *ipKeyer) client(r Request) (netip.Addr, error) {
	client := peerOf(r).Addr()
	if !client.IsValid() {
		return netip.Addr{}, fmt.Errorf("%w: the connection's peer (RemoteAddr over HTTP) is not an IP address", ErrInvalid)
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
func (k *ipKeyer) forwarded(r Request, peer netip.Addr) (netip.Addr, error) {
	lines := headerOf(r, k.header)
	if len(lines) == 0 {
		return peer, nil
	}
	if k.header == headerXRealIP {
		v := lines[len(lines)-1] // a proxy that adds rather than sets puts its own last
		a, ok := parseAddr(v)
		if !ok {
			return netip.Addr{}, &requestError{detail: "header " + k.header + " is not an IP address"}
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
			// The client is not told which entry: that would say how many
			// proxies are trusted.
			return netip.Addr{}, &requestError{
				detail: "header " + k.header + " holds an entry that is not an IP address",
				more:   fmt.Sprintf(" (entry %d of %d, counted from the right)", len(hops)-i, len(hops)),
			}
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
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap().WithZone(""), err == nil // the zero Addr on an error
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

// The key a Limiter gives its store is namespace|scope|client. Neither
// the namespace nor the scope holds '|', so two keys are equal only when
// all three parts are. No part holds '{' or '}': the Redis store wraps the
// key in braces as a Cluster hash tag, which a brace inside would cut
// short, putting every client of a route in one slot.

// storeKey returns the key the store sees for r: prefix (the namespace
// and the route's scope, see policy) and the client's key, from key or,
// when key is nil, the connection's peer, escaped (see clientKey). It
// writes the key to b, where the headers that follow are written too, so
// that a request's keys and header values share one allocation; with the
// default key, the client's address is appended in place.
func storeKey(r Request, key KeyFunc, prefix string, b *strings.Builder) (string, error) {
	if key != nil {
		k, err := key(r)
		if err != nil {
			return "", err
		}
		return storeKeyOf(prefix, k, b), nil
	}
	a, err := peerKeyer.client(r)
	if err != nil {
		return "", err
	}
	if b.Cap() == 0 {
		b.Grow(192)
	}
	start := b.Len()
	var buf [64]byte
	b.WriteString(prefix)
	b.Write(peerKeyer.appendKey(buf[:0], a))
	return b.String()[start:], nil
}

// storeKeyOf is storeKey for a client's key given as it is ([Key]).
func storeKeyOf(prefix, key string, b *strings.Builder) string {
	if b.Cap() == 0 {
		b.Grow(192)
	}
	start := b.Len()
	b.WriteString(prefix)
	b.WriteString(clientKey(key))
	return b.String()[start:]
}

// maxScope is the longest scope kept as it is; longer ones are hashed.
const maxScope = 128

// scopeOf returns the scope of a route pattern, "*" for none: the pattern
// with control bytes, bytes past ASCII, '%', '{' and '}' escaped as %XX,
// or, when that is longer than maxScope, "#" and 32 hex digits of its
// SHA-256.
func scopeOf(pattern string) string {
	if pattern == "" {
		return "*"
	}
	s := escape(pattern)
	if len(s) > maxScope {
		sum := sha256.Sum256([]byte(pattern))
		return "#" + hex.EncodeToString(sum[:16])
	}
	return s
}

// maxClientKey is the longest client key, once escaped, that the store
// sees as it is; longer ones are hashed.
const maxClientKey = 200

// clientKey is the part of the store's key that a KeyFunc's key becomes:
// the key escaped like a scope or, when longer than maxClientKey, "%sha256:"
// and the hex SHA-256 of the key, so that a client cannot fill the store
// with long keys. Both forms are one-to-one and cannot meet: an escaped
// key has no '%' that is not followed by two hex digits.
func clientKey(key string) string {
	s := escape(key)
	if len(s) <= maxClientKey {
		return s
	}
	sum := sha256.Sum256([]byte(key))
	return "%sha256:" + hex.EncodeToString(sum[:])
}

// escape writes bytes outside printable ASCII, '%', '{' and '}' as %XX,
// so that keys read safely in logs and redis-cli and keep the store's
// hash tag whole. It returns s itself when there is nothing to escape.
func escape(s string) string {
	i := 0
	for i < len(s) && !escaped(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if c := s[i]; escaped(c) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// escaped reports whether escape writes c as %XX: a byte outside
// printable ASCII (every byte of a multi-byte character), '%', '{' or '}'.
func escaped(c byte) bool { return c < 0x20 || c > 0x7e || c == '%' || c == '{' || c == '}' }

// hasMethod reports whether a pattern starts with a method, like
// "POST /login".
func hasMethod(pattern string) bool {
	i := strings.IndexByte(pattern, ' ')
	return i > 0 && !strings.Contains(pattern[:i], "/")
}
