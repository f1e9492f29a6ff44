package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// The key a Limiter gives its store is namespace|scope|client: the
// Limiter's namespace, the route pattern whose limits apply ("*" for those
// of WithLimits), and the KeyFunc's key. The namespace holds no '|' and
// the scope none either (patterns with '|' are refused), so two keys are
// equal only when all three parts are. No part holds '{' or '}': the Redis
// store wraps the key in braces as a Redis Cluster hash tag, and a brace
// inside, as in the pattern "GET /users/{id}", would cut the tag short and
// put every client of the route in one slot.

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
	i := strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e || r == '%' || r == '{' || r == '}' })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '%' || c == '{' || c == '}' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// storeKey returns the key the store sees for a KeyFunc's key under p.
func (p *policy) storeKey(key string) string {
	return p.prefix + clientKey(key)
}
