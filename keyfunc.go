package ratelimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
)

// A KeyFunc names who a request is counted against: a client address, an
// API key, a user, a route. It is called for every request, concurrently,
// so it must be safe for concurrent use (the built-in ones are). It
// returns an error wrapping [ErrNoKey] when the request carries no key;
// the limiter then hands the request to its error handler, never to a
// shared bucket, and logs the error at WARN: it says what is missing or
// malformed without quoting the request's values.
//
// The built-in KeyFuncs tag their keys ("ip:", "header:", "user:",
// "route:"), so keys of different kinds never collide, and [Join] combines
// them without ambiguity. A Limiter puts its namespace and the route's
// pattern before the key, so a KeyFunc need not.
//
// Keys are written to the store and may show in its error messages: a
// KeyFunc that reads a secret (an API key, a session token) should return
// a keyed hash of it, as [Header] does.
type KeyFunc func(r *http.Request) (string, error)

// minSecret is the shortest secret Header takes.
const minSecret = 16

// Header keys requests by the value of the named header, such as an API
// key or a token. A request without it, or with it empty, has no key. When
// the header appears more than once, the first value counts, as for
// [http.Header.Get].
//
// The value is a secret, so the key holds not the value but its
// HMAC-SHA256 under secret, 128 bits of it in hex: Redis's KEYS and
// MONITOR, dumps of the key space, and logs never show an API key, and
// whoever reads them cannot test guesses without the secret. Every
// instance of a service must use the same secret, at least 16 bytes (for
// example 32 random bytes from the service's secret store), or they would
// not share counters; changing it starts every counter afresh. The hash
// costs about a quarter of a microsecond per request.
func Header(name string, secret []byte) (KeyFunc, error) {
	if len(secret) < minSecret {
		return nil, fmt.Errorf("%w: Header(%q): the secret is %d bytes long; at least %d are needed, the same on every instance", ErrInvalid, name, len(secret), minSecret)
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
	tag := "header:" + name + ":"
	pool := sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("%w: header %s is missing", ErrNoKey, name)
		}
		h := pool.Get().(hash.Hash)
		h.Reset()
		h.Write([]byte(v))
		var sum [sha256.Size]byte
		h.Sum(sum[:0])
		pool.Put(h)
		var buf [128]byte
		k := append(buf[:0], tag...)
		k = hex.AppendEncode(k, sum[:16])
		return string(k), nil
	}, nil
}

// User keys requests by a value that earlier middleware, typically
// authentication, stored in the request's context under ctxKey. The value
// must be a non-empty string or implement [fmt.Stringer].
func User(ctxKey any) KeyFunc {
	return func(r *http.Request) (string, error) {
		var id string
		switch v := r.Context().Value(ctxKey).(type) {
		case string:
			id = v
		case fmt.Stringer:
			id = v.String()
		}
		if id == "" {
			return "", fmt.Errorf("%w: no user in the request context", ErrNoKey)
		}
		return "user:" + id, nil
	}
}

// Route keys requests by method and matched route pattern, for example
// "route:POST /login", so that each route has its own counter. The pattern
// is the one the router matched: [http.Request.Pattern] with Go's
// ServeMux (the limiter must then run inside the mux, around a route's
// handler), or what a framework adapter passes with [RequestWithRoute].
// The raw URL path is never used: it would let clients mint keys at will.
func Route(r *http.Request) (string, error) {
	p := RoutePattern(r)
	if p == "" {
		return "", fmt.Errorf("%w: no route pattern (run the limiter inside the router, or through an adapter)", ErrNoKey)
	}
	if hasMethod(p) {
		return "route:" + p, nil
	}
	return "route:" + r.Method + " " + p, nil
}

// Join keys requests by all of keys together, for example an API key per
// route. Each part is prefixed with its length, so different parts can
// never join into the same key. If any part fails, Join fails.
func Join(keys ...KeyFunc) KeyFunc {
	return func(r *http.Request) (string, error) {
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
