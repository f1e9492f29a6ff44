package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"weak"
)

// DefaultNamespace is the namespace of a Limiter built without
// [WithNamespace].
const DefaultNamespace = "default"

// A Limiter is HTTP middleware that decides, for every request, whether it
// may pass. It takes the request's key (see [KeyFunc]), asks its [Store]
// about the limits that apply (see [WithLimits] and [WithRoutes]), sets
// the rate-limit headers, and either lets the request through or answers
// it: 429 when denied, the error handler's answer when it cannot decide.
//
// Use [Limiter.Handler] with net/http; the Gin and Echo adapters call
// [Limiter.Allow]. A Limiter is safe for concurrent use.
type Limiter struct {
	store       Store
	limits      []Limit
	routeLimits map[string][]Limit
	key         KeyFunc
	cost        func(*http.Request) int
	skip        func(*http.Request) bool
	deny        DenyHandler
	onError     ErrorHandler
	headers     HeaderStyle
	namespace   string
	dryRun      bool
	report      func(*http.Request, Decision)
	logger      *slog.Logger

	all    *policy            // the limits of WithLimits; nil without
	routes map[string]*policy // by pattern, as given to WithRoutes
	match  *http.ServeMux     // the routes' patterns, for requests whose pattern is unknown
	logs   logThrottle
	counts counters
}

// DenyHandler answers a denied request. When it runs, the rate-limit
// headers and Retry-After are set already.
type DenyHandler func(w http.ResponseWriter, r *http.Request, d Decision)

// ErrorHandler answers a request the Limiter could not decide and returns
// whether to serve it anyway. err wraps [ErrNoKey] when the request has no
// key, [ErrInvalid] when its cost is invalid, and is a store failure
// otherwise. Never show err to the client: it may describe your
// infrastructure.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error) (serve bool)

// New returns a Limiter that keeps its counters in store. It needs limits
// ([WithLimits], [WithRoutes] or both); the other options have defaults:
// requests are keyed by [RemoteIP], cost 1, are denied by [Deny], fail
// open ([FailOpen]) when the store fails, and get [HeadersAll]. Every
// option is checked here, and the error names the one at fault.
func New(store Store, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: New: the store is nil", ErrInvalid)
	}
	l := &Limiter{
		store:     store,
		key:       RemoteIP,
		deny:      Deny,
		onError:   FailOpen,
		headers:   HeadersAll,
		namespace: DefaultNamespace,
		logger:    slog.Default(),
	}
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: New: option %d is nil", ErrInvalid, i)
		}
		if err := opt(l); err != nil {
			return nil, err
		}
	}
	if len(l.limits) == 0 && len(l.routeLimits) == 0 {
		return nil, fmt.Errorf("%w: New: no limits; use WithLimits, WithRoutes or both", ErrInvalid)
	}
	if len(l.limits) > 0 {
		l.all = newPolicy(scopeOf(l.namespace, ""), l.limits)
	}
	if err := l.buildRoutes(); err != nil {
		return nil, err
	}
	if l.namespace == DefaultNamespace {
		if err := claimDefaultNamespace(store, l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Middleware is [New] for net/http: it returns the Limiter's
// [Limiter.Handler].
func Middleware(store Store, opts ...Option) (func(http.Handler) http.Handler, error) {
	l, err := New(store, opts...)
	if err != nil {
		return nil, err
	}
	return l.Handler, nil
}

// Handler returns next wrapped by the Limiter. The ResponseWriter next
// gets is the one the server gave, so all its optional interfaces
// (http.Flusher, http.Hijacker, ...) survive.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.Allow(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// Allow decides r. When r may pass, it sets the rate-limit headers on w
// and returns true; the caller then serves r. Otherwise it has answered r
// on w (429, or the error handler's answer) and returns false. It is the
// one decision function behind the net/http, Gin and Echo middleware.
func (l *Limiter) Allow(w http.ResponseWriter, r *http.Request) bool {
	if l.skip != nil && l.skip(r) {
		return true
	}
	p := l.policyFor(r)
	if p == nil {
		return true
	}
	key, err := l.key(r)
	if err != nil {
		return l.fail(w, r, err)
	}
	cost := 1
	if l.cost != nil {
		cost = l.cost(r)
	}
	d, err := l.store.Allow(r.Context(), storeKey(key), cost, p.scoped...)
	if err != nil {
		return l.fail(w, r, err)
	}
	for i := range d.Results {
		d.Results[i].Limit = p.given[i] // as configured, without the Limiter's scope
	}
	l.setHeaders(w, p, d)
	if d.Fallback {
		l.counts.fallback.Add(1)
	}
	if d.Allowed {
		l.counts.allowed.Add(1)
		return true
	}
	l.counts.denied.Add(1)
	if l.dryRun {
		l.wouldDeny(r, d)
		return true
	}
	setRetryAfter(w, d.RetryAfter())
	l.deny(w, r, d)
	return false
}

// Reset forgets the counters of r's key under the limits that apply to r,
// for example after a successful login. The store must implement
// [Resetter].
func (l *Limiter) Reset(r *http.Request) error {
	resetter, ok := l.store.(Resetter)
	if !ok {
		return fmt.Errorf("%w: Reset: the store (%T) cannot reset keys", ErrInvalid, l.store)
	}
	p := l.policyFor(r)
	if p == nil {
		return nil
	}
	key, err := l.key(r)
	if err != nil {
		return err
	}
	return resetter.Reset(r.Context(), storeKey(key), p.scoped...)
}

// maxKeyPart is the longest key, once escaped, that the store sees as it
// is; longer keys are hashed.
const maxKeyPart = 200

// storeKey is the key the store sees for a KeyFunc's key. Bytes outside
// printable ASCII, and '%', are escaped as %XX, so that keys read safely
// in logs and redis-cli; keys longer than maxKeyPart once escaped become
// "%sha256:" and the hex SHA-256 of the key, so that a client cannot fill
// the store with long keys. Both forms are one-to-one, and cannot meet:
// an escaped key has no '%' that is not followed by two hex digits.
func storeKey(key string) string {
	clean := true
	for i := 0; i < len(key) && clean; i++ {
		clean = key[i] >= 0x20 && key[i] < 0x7f && key[i] != '%'
	}
	if !clean {
		var b strings.Builder
		for i := 0; i < len(key); i++ {
			if c := key[i]; c < 0x20 || c >= 0x7f || c == '%' {
				fmt.Fprintf(&b, "%%%02X", c)
			} else {
				b.WriteByte(c)
			}
		}
		if b.Len() <= maxKeyPart {
			return b.String()
		}
	} else if len(key) <= maxKeyPart {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "%sha256:" + hex.EncodeToString(sum[:])
}

// buildRoutes turns WithRoutes' table into policies and a matcher.
func (l *Limiter) buildRoutes() (err error) {
	if len(l.routeLimits) == 0 {
		return nil
	}
	l.routes = make(map[string]*policy, len(l.routeLimits))
	l.match = http.NewServeMux()
	for pattern, limits := range l.routeLimits {
		if pattern == "" || strings.ContainsAny(pattern, "|\x00") {
			return fmt.Errorf("%w: WithRoutes: pattern %q is empty or holds '|' or NUL", ErrInvalid, pattern)
		}
		if err := register(l.match, pattern); err != nil {
			return fmt.Errorf("%w: WithRoutes: pattern %q: %v", ErrInvalid, pattern, err)
		}
		l.routes[pattern] = newPolicy(scopeOf(l.namespace, pattern), limits)
	}
	return nil
}

// register adds pattern to mux, turning ServeMux's panic on a bad or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}

// policyFor returns the limits that apply to r, or nil if none do.
func (l *Limiter) policyFor(r *http.Request) *policy {
	if l.routes == nil {
		return l.all
	}
	pattern := RoutePattern(r)
	if pattern == "" {
		_, pattern = l.match.Handler(r)
	}
	if p, ok := l.routes[pattern]; ok {
		return p
	}
	if i := strings.IndexByte(pattern, ' '); hasMethod(pattern) {
		if p, ok := l.routes[pattern[i+1:]]; ok {
			return p
		}
	} else if p, ok := l.routes[r.Method+" "+pattern]; ok {
		return p
	}
	return l.all
}

// fail logs err and hands r to the error handler. A request whose
// context ended before the store decided is no store failure: it is
// counted apart and not logged.
func (l *Limiter) fail(w http.ResponseWriter, r *http.Request, err error) bool {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		l.counts.canceled.Add(1)
		return l.onError(w, r, err)
	}
	kind, msg, level := logStoreError, "ratelimit: store failed", slog.LevelError
	if isRequestError(err) {
		kind, msg, level = logRequestError, "ratelimit: request not decided", slog.LevelWarn
		l.counts.badRequests.Add(1)
	} else {
		l.counts.storeErrors.Add(1)
	}
	if ok, dropped := l.logs.allow(kind); ok {
		l.logger.LogAttrs(r.Context(), level, msg, slog.String("error", err.Error()),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int64("suppressed", dropped))
	}
	return l.onError(w, r, err)
}

// wouldDeny reports a request a dry run lets through.
func (l *Limiter) wouldDeny(r *http.Request, d Decision) {
	if l.report != nil {
		l.report(r, d)
		return
	}
	if ok, dropped := l.logs.allow(logDryRun); ok {
		denied, _ := d.DeniedBy()
		l.logger.LogAttrs(r.Context(), slog.LevelInfo, "ratelimit: dry run: would deny",
			slog.String("limit", denied.Limit.String()), slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Duration("retry_after", d.RetryAfter()), slog.Int64("suppressed", dropped))
	}
}

func isRequestError(err error) bool {
	return errors.Is(err, ErrNoKey) || errors.Is(err, ErrInvalid)
}

// Deny is the default [DenyHandler]: 429 Too Many Requests with a short
// body, RFC 9457 problem JSON when the client accepts JSON, plain text
// otherwise.
func Deny(w http.ResponseWriter, r *http.Request, d Decision) {
	writeStatus(w, r, http.StatusTooManyRequests, fmt.Sprintf("rate limit exceeded; retry in %d s", max(seconds(d.RetryAfter()), 1)))
}

// FailOpen is the default [ErrorHandler]: when the store fails, the
// request is served, unlimited (the failure is logged), so that a Redis
// outage does not become an outage of the service. A request with no key
// or an invalid cost gets 400 Bad Request: serving it would let clients
// escape the limit by leaving the key out.
func FailOpen(w http.ResponseWriter, r *http.Request, err error) bool {
	if isRequestError(err) {
		writeStatus(w, r, http.StatusBadRequest, "the request cannot be rate limited")
		return false
	}
	return true
}

// FailClosed is an [ErrorHandler] that refuses requests while the store
// fails: 503 Service Unavailable with Retry-After: 1. Requests with no key
// or an invalid cost get 400, as with [FailOpen].
func FailClosed(w http.ResponseWriter, r *http.Request, err error) bool {
	if isRequestError(err) {
		writeStatus(w, r, http.StatusBadRequest, "the request cannot be rate limited")
		return false
	}
	w.Header().Set(HeaderRetryAfter, "1")
	writeStatus(w, r, http.StatusServiceUnavailable, "rate limiting is unavailable; retry in 1 s")
	return false
}

// defaultOwners records, per store, the live Limiter using the default
// namespace, so that a second one is refused rather than silently sharing
// its counters.
var defaultOwners = struct {
	sync.Mutex
	m map[uintptr]weak.Pointer[Limiter]
}{m: make(map[uintptr]weak.Pointer[Limiter])}

func claimDefaultNamespace(store Store, l *Limiter) error {
	v := reflect.ValueOf(store)
	if v.Kind() != reflect.Pointer {
		return nil // only stores behind pointers have an identity to check
	}
	id := v.Pointer()
	defaultOwners.Lock()
	defer defaultOwners.Unlock()
	if owner, ok := defaultOwners.m[id]; ok && owner.Value() != nil {
		return fmt.Errorf("%w: New: another Limiter on this store already uses the default namespace, and the two would share counters; give each its own with WithNamespace", ErrInvalid)
	}
	wp := weak.Make(l)
	defaultOwners.m[id] = wp
	runtime.AddCleanup(l, func(id uintptr) {
		defaultOwners.Lock()
		defer defaultOwners.Unlock()
		if defaultOwners.m[id] == wp {
			delete(defaultOwners.m, id)
		}
	}, id)
	return nil
}
