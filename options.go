package ratelimit

import (
	"fmt"
	"log/slog"
	"net/http"
)

// An Option configures a [Limiter]; see [New]. Options are checked when
// the Limiter is built, and a bad one is reported there, by name.
type Option func(*Limiter) error

// WithLimits sets the limits every request must pass, all at once (for
// example 10 per second and 500 per hour). A Limiter needs limits, a route
// table ([WithRoutes]), or both.
func WithLimits(limits ...Limit) Option {
	return func(l *Limiter) error {
		if problem := checkLimits(limits); problem != "" {
			return fmt.Errorf("%w: WithLimits: %s", ErrInvalid, problem)
		}
		l.limits = limits
		return nil
	}
}

// WithRoutes gives routes limits of their own, replacing those of
// [WithLimits] for the requests they match. A key is a route pattern as the
// router writes it, with or without a method: "POST /login",
// "/api/{version}/", or a Gin or Echo path like "/users/:id". A request
// matches the entry of the pattern its router matched (see
// [RoutePattern]); when the Limiter wraps the whole router and no pattern
// is known yet, the request is matched against the table's patterns with
// the rules of [http.ServeMux]. Each route counts in its own keys: routes
// never share counters with each other or with the default limits.
func WithRoutes(routes map[string][]Limit) Option {
	return func(l *Limiter) error {
		for pattern, limits := range routes {
			if problem := checkLimits(limits); problem != "" {
				return fmt.Errorf("%w: WithRoutes[%q]: %s", ErrInvalid, pattern, problem)
			}
		}
		l.routeLimits = routes
		return nil
	}
}

// WithKey sets how requests are told apart. The default is [RemoteIP].
func WithKey(key KeyFunc) Option {
	return func(l *Limiter) error {
		if key == nil {
			return fmt.Errorf("%w: WithKey: the KeyFunc is nil", ErrInvalid)
		}
		l.key = key
		return nil
	}
}

// WithCost weighs requests: cost(r) units are taken instead of 1. A cost
// below 1 or above a limit's capacity sends the request to the error
// handler with an error wrapping [ErrInvalid].
func WithCost(cost func(r *http.Request) int) Option {
	return func(l *Limiter) error {
		if cost == nil {
			return fmt.Errorf("%w: WithCost: the function is nil", ErrInvalid)
		}
		l.cost = cost
		return nil
	}
}

// WithSkip exempts the requests for which skip returns true, such as
// health checks or an allowlist: they pass with no check and no header.
func WithSkip(skip func(r *http.Request) bool) Option {
	return func(l *Limiter) error {
		if skip == nil {
			return fmt.Errorf("%w: WithSkip: the function is nil", ErrInvalid)
		}
		l.skip = skip
		return nil
	}
}

// WithDenyHandler sets what answers a denied request, after the rate-limit
// headers and Retry-After are set. The default is [Deny].
func WithDenyHandler(deny DenyHandler) Option {
	return func(l *Limiter) error {
		if deny == nil {
			return fmt.Errorf("%w: WithDenyHandler: the handler is nil", ErrInvalid)
		}
		l.deny = deny
		return nil
	}
}

// WithErrorHandler sets what happens to a request the Limiter cannot
// decide: the store failed, the request has no key, or its cost is
// invalid. The default is [FailOpen]; see also [FailClosed].
func WithErrorHandler(onError ErrorHandler) Option {
	return func(l *Limiter) error {
		if onError == nil {
			return fmt.Errorf("%w: WithErrorHandler: the handler is nil", ErrInvalid)
		}
		l.onError = onError
		return nil
	}
}

// WithHeaders selects the rate-limit headers; the default is [HeadersAll].
func WithHeaders(style HeaderStyle) Option {
	return func(l *Limiter) error {
		if style&^HeadersAll != 0 {
			return fmt.Errorf("%w: WithHeaders: unknown header style %#x", ErrInvalid, uint8(style))
		}
		l.headers = style
		return nil
	}
}

// WithNamespace names the Limiter's counters: keys of Limiters with
// different namespaces never meet in the store. Give every Limiter of a
// service its own; two Limiters on one store may share the default
// namespace, "default", only by mistake, so [New] refuses the second. The
// same name on every instance of a service makes them share one limit. It
// is 1 to 64 letters, digits, '.', '_' or '-'.
func WithNamespace(name string) Option {
	return func(l *Limiter) error {
		if err := checkNamespace(name); err != nil {
			return fmt.Errorf("%w: WithNamespace(%q): %v", ErrInvalid, name, err)
		}
		l.namespace = name
		return nil
	}
}

// WithDryRun makes the Limiter decide and set headers as usual but never
// block: a request that would be denied is passed on to report, or, when
// report is nil, logged; then it is served. Use it to try limits on live
// traffic.
func WithDryRun(report func(r *http.Request, d Decision)) Option {
	return func(l *Limiter) error {
		l.dryRun = true
		l.report = report
		return nil
	}
}

// WithLogger sets where the Limiter logs store failures, rejected keys
// and, in dry-run mode, would-be denials; at most one line a second of
// each. The default is [slog.Default].
func WithLogger(logger *slog.Logger) Option {
	return func(l *Limiter) error {
		if logger == nil {
			return fmt.Errorf("%w: WithLogger: the logger is nil", ErrInvalid)
		}
		l.logger = logger
		return nil
	}
}

// checkLimits describes what makes limits unusable by a Limiter, or
// returns "".
func checkLimits(limits []Limit) string {
	if problem := checkLimitSet(limits); problem != "" {
		return problem
	}
	for i, l := range limits {
		if err := checkName(l.Name); err != nil {
			return fmt.Sprintf("limits[%d].Name %v", i, err)
		}
		for j := range i {
			if l.Name != "" && limits[j].Name == l.Name {
				return fmt.Sprintf("limits[%d].Name %q is also the name of limits[%d]; names tell policies apart in headers", i, l.Name, j)
			}
		}
	}
	return ""
}

func checkNamespace(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("must be 1 to 64 bytes long, got %d", len(name))
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q is not a letter, digit, '.', '_' or '-'", c)
		}
	}
	return nil
}
