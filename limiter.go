package ratelimit

import (
	"fmt"
	"log/slog"
	"net/http"
)

// A Limiter is HTTP middleware that decides, for every request, whether it
// may pass. It takes the request's key (see [KeyFunc]), asks its [Store]
// about the limits that apply (see [WithLimits] and [WithRoutes]), sets
// the rate-limit headers, and either lets the request through or answers
// it: 429 when denied, the error handler's answer when it cannot decide.
//
// Use [Limiter.Handler] with net/http; the Gin and Echo adapters call
// [Limiter.Allow]. Build one with [New]: the zero Limiter is not usable. A
// Limiter is safe for concurrent use; its configuration never changes
// after New.
type Limiter struct {
	store     Store
	namespace string
	key       KeyFunc
	ip        *ipKeyer // remoteKeyer while key is the default; nil after WithKey
	cost      func(*http.Request) int
	skip      func(*http.Request) bool
	deny      func(http.ResponseWriter, *http.Request, Decision)
	onError   func(http.ResponseWriter, *http.Request, error) bool
	headers   HeaderStyle
	dryRun    bool
	report    func(*http.Request, Decision)
	observe   func(*http.Request, Event) // of WithObserver; nil without
	logger    *slog.Logger

	all    *policy // the limits of WithLimits; nil without
	routes *routes // of WithRoutes; nil without

	limitsFunc func(*http.Request) []Limit // of WithLimitsFunc; nil without
	sets       setMemo                     // the sets limitsFunc returned
	countOnly  func(status int) bool       // of WithCountOnly; nil: count every request
	ban        Ban                         // of WithBan; zero: none
	unit       string                      // of WithQuotaUnit; "": no qu
	partition  *partitionKeys              // of WithPartitionKey; nil: no pk
	logs       logThrottle
	counts     counters
}

// New returns a Limiter that keeps its counters in store under namespace.
//
// The namespace is the first part of every key the Limiter gives the
// store, before the route and the client's key: Limiters of different
// namespaces never share counters, whatever stores they use, and Limiters
// of one namespace share them on purpose, which is how the instances of a
// service share one limit. Give each Limiter of a service its own, for
// example "api" and "login": 1 to 64 letters, digits, '.', '_' or '-'.
//
// A Limiter needs limits ([WithLimits], [WithRoutes], [WithLimitsFunc], or
// several); the other
// options have defaults: requests are keyed by the address of the
// connection's peer (the zero [IPKey]), cost 1, are denied by [Deny], fail
// open ([FailOpen]) when the store fails, and get both kinds of headers.
// Every option is checked here, and the error names the one at fault.
func New(store Store, namespace string, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: New: the store is nil", ErrInvalid)
	}
	if err := checkNamespace(namespace); err != nil {
		return nil, fmt.Errorf("%w: New: namespace %q %v", ErrInvalid, namespace, err)
	}
	l := &Limiter{
		store:     store,
		namespace: namespace,
		key:       remoteIP,
		ip:        remoteKeyer,
		deny:      Deny,
		onError:   FailOpen,
		headers:   HeadersDraft | HeadersX,
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
	if l.all == nil && l.routes == nil && l.limitsFunc == nil {
		return nil, fmt.Errorf("%w: New: no limits; use WithLimits, WithRoutes, WithLimitsFunc, or several", ErrInvalid)
	}
	l.all = l.all.withBan(l.ban).withUnit(l.unit)
	if l.routes != nil {
		for pattern, p := range l.routes.policies {
			l.routes.policies[pattern] = p.withBan(l.ban).withUnit(l.unit)
		}
	}
	return l, nil
}

// checkNamespace says what is wrong with a namespace.
func checkNamespace(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("must be 1 to 64 bytes long, got %d", len(name))
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("holds %q, which is not a letter, digit, '.', '_' or '-'", c)
		}
	}
	return nil
}
