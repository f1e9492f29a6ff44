package ratelimit

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"slices"

	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

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
// several); the other options have defaults: requests are keyed by the
// address of the connection's peer (the zero [IPKey]), cost 1, are denied
// with a 429 (see [WithDenyHandler]), fail open ([FailOpen]) when the
// store fails, and get both kinds of headers (the zero [Headers]). Every
// option is checked here, and the error names the one at fault.
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
		deny:      deny429,
		onError:   FailOpen,
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
	if l.given.limits == nil && l.given.routes == nil && l.limitsFunc == nil {
		return nil, fmt.Errorf("%w: New: no limits; use WithLimits, WithRoutes, WithLimitsFunc, or several", ErrInvalid)
	}
	l.base.namespace, l.base.unit, l.base.countOnly = namespace, l.headers.QuotaUnit, l.countOnly != nil
	l.sets = bounded.Map[setKey, checkedSet]{Max: maxSets, Make: func(k setKey) (c checkedSet) {
		c.p, c.problem = l.base.newPolicy(k.pattern, k.limits[:k.n])
		if c.p != nil && l.overrides != nil {
			l.overrides.Attach(l, namespace, l.store, l.observe, map[string][]Limit{k.pattern: c.p.set.limits})
		}
		return c
	}}
	l.overriddenSets = bounded.Map[overriddenKey, checkedSet]{Max: maxOverridden, Make: l.makeOverridden}
	if l.given.limits != nil {
		var problem string
		if l.all, problem = l.base.newPolicy("", l.given.limits); problem != "" {
			return nil, fmt.Errorf("%w: WithLimits: %s", ErrInvalid, problem)
		}
	}
	if l.given.routes != nil {
		var err error
		if l.routes, err = newRoutes(l.base, l.given.routes); err != nil {
			return nil, err
		}
	}
	if l.headers.PartitionKey != nil {
		l.partition = newPartitionKeys(l.headers.PartitionKey)
	}
	l.given.limits, l.given.routes = nil, nil
	if l.overrides != nil {
		l.attachOverrides()
	}
	return l, nil
}

// checkNamespace says what is wrong with a namespace.
func checkNamespace(name string) error {
	if name == "" || len(name) > wire.MaxName {
		return fmt.Errorf("must be 1 to %d bytes long, got %d", wire.MaxName, len(name))
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("holds %q, which is not a letter, digit, '.', '_' or '-'", c)
		}
	}
	return nil
}

// An Option configures a [Limiter]; see [New]. Options are checked when
// the Limiter is built, and a bad one is reported there, by name. A nil
// Option is refused.
type Option func(*Limiter) error

// WithLimits sets the limits every request must pass, all at once (for
// example 10 per second and 500 per hour). A Limiter needs limits, a route
// table ([WithRoutes]), or both.
func WithLimits(limits ...Limit) Option {
	return func(l *Limiter) error {
		l.given.limits = append([]Limit{}, limits...)
		return nil
	}
}

// WithRoutes gives routes limits of their own, replacing those of
// [WithLimits] for the requests they match. A key is a route pattern of
// Go's [http.ServeMux], with or without a method or a host: "POST
// /login", "/api/{version}/". A request gets the entry of its route's
// shape, whatever the parameters are named and wherever the Limiter sits
// (inside the router or around it). Routes never share counters with
// each other or with WithLimits'. See docs/limits.md.
//
// A pattern in another router's syntax ("/:id", "/*"), a method not in
// upper case, and two patterns of one shape are refused, naming the
// pattern. Tables given to one Limiter (by WithRoutes, ginlimit.Routes,
// echolimit.Routes and grpclimit.Methods) are merged; a pattern in two
// of them is refused.
func WithRoutes(table map[string][]Limit) Option {
	return func(l *Limiter) error {
		if table == nil {
			return fmt.Errorf("%w: WithRoutes: the table is nil", ErrInvalid)
		}
		if l.given.routes == nil {
			l.given.routes = make(map[string][]Limit, len(table))
		}
		for _, pattern := range slices.Sorted(maps.Keys(table)) {
			if _, dup := l.given.routes[pattern]; dup {
				return fmt.Errorf("%w: WithRoutes: pattern %q is in two tables given to the Limiter (the tables of WithRoutes, grpclimit.Methods, ginlimit.Routes and echolimit.Routes are merged); give it once", ErrInvalid, pattern)
			}
			l.given.routes[pattern] = table[pattern]
		}
		return nil
	}
}

// WithLimitsFunc sets limits per request: limits(r) returns the limits r
// must pass, for example a plan looked up from the caller's API key, in
// place of those of its route and of [WithLimits]; nil or none keeps
// those. They count under the route's pattern, so a caller whose plan
// changes keeps its counts where the limits share an algorithm and
// window. Up to 1,024 distinct sets are checked once and kept. An invalid
// set, or one of more than 8 limits, sends the request to the error
// handler with an error wrapping [ErrInvalid]. limits is called for every
// request that is not skipped, concurrently. See docs/limits.md.
func WithLimitsFunc(limits func(r Request) []Limit) Option {
	return nonNil("WithLimitsFunc: the function", limits == nil, func(l *Limiter) { l.limitsFunc = limits })
}

// WithBan bans keys that keep getting denied (see [Ban]), under every
// limit of the Limiter: those of [WithLimits], [WithRoutes] and
// [WithLimitsFunc]. A banned key is denied with a Retry-After to the end
// of its ban, and its [Decision] says so (Decision.Banned). With
// [WithCountOnly], a request denied before its handler is decided by the
// store's Allow rather than Peek, so that the denial counts towards the
// ban; Allow takes nothing from a key it denies.
func WithBan(ban Ban) Option {
	return func(l *Limiter) error {
		if field, problem := ban.check(); field != "" {
			return fmt.Errorf("%w: WithBan: Ban.%s %s", ErrInvalid, field, problem)
		}
		l.base.ban = ban
		return nil
	}
}

// WithKey sets how requests are told apart. The default is the address
// of the connection's peer (the zero [IPKey]); behind a proxy, use an
// IPKey that trusts it.
func WithKey(key KeyFunc) Option {
	return nonNil("WithKey: the KeyFunc", key == nil, func(l *Limiter) { l.keyFunc = key })
}

// WithCost weighs requests: cost(r) units are taken instead of 1. A cost
// below 1 or above a limit's capacity sends the request to the error
// handler with an error wrapping [ErrInvalid].
func WithCost(cost func(r Request) int) Option {
	return nonNil("WithCost: the function", cost == nil, func(l *Limiter) { l.costFunc = cost })
}

// WithSkip exempts the requests for which skip returns true, such as
// health checks or an allowlist: they pass with no check and no header.
func WithSkip(skip func(r Request) bool) Option {
	return nonNil("WithSkip: the function", skip == nil, func(l *Limiter) { l.skip = skip })
}

// WithCountOnly counts a request only when its response's status passes
// count, for example the failed attempts of a login: nil counts failures,
// status >= 400, and func(s int) bool { return s < 400 } successes.
//
// Every limit of the Limiter is then charged from usage (see
// [Limit].Usage): a request's usage is its cost (or what it reported
// with [Charge]) when its status passes count, else 0, charged once it
// returns ([Limiter.End]). See docs/limits.md.
//
// With [Limiter.Handler] the handler writes through a ResponseWriter that
// reports the status as the header is written; it is an [http.Flusher]
// and an [http.Hijacker] (failing with [http.ErrNotSupported] when the
// server's writer is not), and [http.ResponseController] reaches the
// server's writer through its Unwrap method. The Gin and Echo adapters
// report the status with [Limiter.Finish], also as the header is written.
func WithCountOnly(count func(status int) bool) Option {
	return func(l *Limiter) error {
		if count == nil {
			count = func(status int) bool { return status >= 400 }
		}
		l.countOnly = count
		return nil
	}
}

// WithDenyHandler sets what answers a denied HTTP request, after the
// rate-limit headers and Retry-After are set. The default answers 429 Too
// Many Requests with a short body, plain text, or RFC 9457 problem JSON
// when the client accepts JSON: the problem type is the draft's
// quota-exceeded, or abnormal-usage-detected for a banned key (see
// [Ban]), with the extension member "violated-policies", the names of the
// denied limits as the RateLimit-Policy header names them.
func WithDenyHandler(deny func(w http.ResponseWriter, r *http.Request, d Decision)) Option {
	return nonNil("WithDenyHandler: the handler", deny == nil, func(l *Limiter) { l.deny = deny })
}

// WithErrorHandler sets what answers a request the Limiter could not
// decide, and returns whether to serve it anyway. err wraps [ErrInvalid]
// when the request has no key, or its cost or the limits [WithLimitsFunc]
// returned for it are invalid, and is a store failure otherwise. Never
// show err to the client: it may describe your infrastructure. The
// default is [FailOpen]; see also [FailClosed].
//
// The handler answers HTTP requests. Outside HTTP ([Limiter.Decide]), a
// request that cannot be counted is refused, and one the store failed to
// decide passes, unless the handler is FailClosed, which refuses it there
// too.
func WithErrorHandler(onError func(w http.ResponseWriter, r *http.Request, err error) (serve bool)) Option {
	return nonNil("WithErrorHandler: the handler", onError == nil, func(l *Limiter) {
		l.onError = onError
		l.failClosed = reflect.ValueOf(onError).Pointer() == reflect.ValueOf(FailClosed).Pointer()
	})
}

// WithHeaders selects the rate-limit headers and their parameters (see
// [Headers]). Without it, a Limiter sets both kinds of headers, with no
// quota unit and no partition key.
func WithHeaders(h Headers) Option {
	return func(l *Limiter) error {
		if problem := h.check(); problem != "" {
			return fmt.Errorf("%w: WithHeaders: %s", ErrInvalid, problem)
		}
		l.headers = h
		return nil
	}
}

// WithDryRun makes every limit of the Limiter Shadow (see [Limit]): it
// decides and sets headers as usual but never blocks. A request that
// would be denied is passed on to report, or, when report is nil,
// logged; then it is served, with no Retry-After. Use it to try limits
// on live traffic; an override can enforce one of them at runtime (see
// [WithOverrides]). Without WithDryRun, report is where the would-be
// denials of Shadow limits go too.
func WithDryRun(report func(r Request, d Decision)) Option {
	return func(l *Limiter) error {
		l.base.shadow = true
		l.report = report
		return nil
	}
}

// WithObserver calls observe for every request the Limiter decides or
// fails to decide, after the store answered and before the response is
// written, on the request's goroutine: a request the limits do not apply
// to, or that [WithSkip] skips, is not observed. observe must be safe
// for concurrent use and quick, and must not write to the response.
// Given several times, the observers are called in order. A Limiter
// without one measures nothing; with one, it reads the clock twice per
// request, and allocates nothing more.
func WithObserver(observe func(r Request, e Event)) Option {
	return nonNil("WithObserver: the observer", observe == nil, func(l *Limiter) {
		if prev := l.observe; prev != nil {
			l.observe = func(r Request, e Event) { prev(r, e); observe(r, e) }
		} else {
			l.observe = observe
		}
	})
}

// WithLogger sets where the Limiter logs store failures, rejected keys
// and, in dry-run mode, would-be denials; at most one line a second of
// each. The default is [slog.Default].
func WithLogger(logger *slog.Logger) Option {
	return nonNil("WithLogger: the logger", logger == nil, func(l *Limiter) { l.logger = logger })
}

// nonNil returns an Option that refuses a nil value, named by what, or
// else sets it.
func nonNil(what string, isNil bool, set func(*Limiter)) Option {
	return func(l *Limiter) error {
		if isNil {
			return fmt.Errorf("%w: %s is nil", ErrInvalid, what)
		}
		set(l)
		return nil
	}
}
