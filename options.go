package ratelimit

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/ratelimit-go/ratelimit/internal/routesyntax"
)

// An Option configures a [Limiter]; see [New]. Options are checked when
// the Limiter is built, and a bad one is reported there, by name. A nil
// Option is refused.
type Option func(*Limiter) error

// WithLimits sets the limits every request must pass, all at once (for
// example 10 per second and 500 per hour). A Limiter needs limits, a route
// table ([WithRoutes]), or both.
func WithLimits(limits ...Limit) Option {
	return func(l *Limiter) error {
		p, problem := newPolicy(l.namespace, "", limits)
		if problem != "" {
			return fmt.Errorf("%w: WithLimits: %s", ErrInvalid, problem)
		}
		l.all = p
		return nil
	}
}

// WithRoutes gives routes limits of their own, replacing those of
// [WithLimits] for the requests they match. A key is a route pattern of
// Go's [http.ServeMux], with or without a method: "POST /login",
// "/api/{version}/". A request matches the entry of the pattern its
// router matched ([http.Request.Pattern], or the one an adapter passes
// with [RequestWithRoute]); when the Limiter wraps the whole router and no
// pattern is known yet, the request is matched against the table's
// patterns with the rules of [http.ServeMux]. The pattern is part of the
// keys the store sees: routes never share counters with each other or with
// the limits of WithLimits.
//
// A pattern in another router's syntax, such as Gin's and Echo's "/:id"
// or chi's "/*", is refused, naming the pattern and how ServeMux writes it:
// it would never match. With Gin and Echo, build the table with the
// adapter's Routes option (ginlimit.Routes, echolimit.Routes) instead.
func WithRoutes(table map[string][]Limit) Option {
	return withRoutes(routesyntax.ServeMux, table)
}

// WithLimitsFunc sets limits per request: limits(r) returns the limits r
// must pass, for example a plan looked up from the caller's API key, in
// place of those of its route and of [WithLimits]; nil or none keeps
// those. The limits count under the route's pattern, or with those of
// WithLimits when no route matches, so a caller whose plan changes keeps
// its counts where the new limits share an algorithm and window with the
// old.
//
// Each distinct set is checked and compiled once and then reused, up to
// 1,024 sets (past that, they are checked again as they come). An invalid
// set, or one of more than 8 limits, sends the request to the error
// handler with an error wrapping [ErrInvalid] that names the limit at
// fault, and nothing is counted. limits is called for every request that
// is not skipped, concurrently.
func WithLimitsFunc(limits func(r *http.Request) []Limit) Option {
	return func(l *Limiter) error {
		if limits == nil {
			return fmt.Errorf("%w: WithLimitsFunc: the function is nil", ErrInvalid)
		}
		l.limitsFunc = limits
		return nil
	}
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
		l.ban = ban
		return nil
	}
}

// WithKey sets how requests are told apart. The default is the address
// of the connection's peer (the zero [IPKey]); behind a proxy, use
// [ClientIP].
func WithKey(key KeyFunc) Option {
	return func(l *Limiter) error {
		if key == nil {
			return fmt.Errorf("%w: WithKey: the KeyFunc is nil", ErrInvalid)
		}
		l.key, l.ip = key, nil
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
func WithDenyHandler(deny func(w http.ResponseWriter, r *http.Request, d Decision)) Option {
	return func(l *Limiter) error {
		if deny == nil {
			return fmt.Errorf("%w: WithDenyHandler: the handler is nil", ErrInvalid)
		}
		l.deny = deny
		return nil
	}
}

// WithErrorHandler sets what answers a request the Limiter could not
// decide, and returns whether to serve it anyway. err wraps [ErrNoKey] when
// the request has no key, [ErrInvalid] when its cost or the limits
// [WithLimitsFunc] returned for it are invalid, and is a store failure
// otherwise. Never show err to the client: it may describe
// your infrastructure. The default is [FailOpen]; see also [FailClosed].
func WithErrorHandler(onError func(w http.ResponseWriter, r *http.Request, err error) (serve bool)) Option {
	return func(l *Limiter) error {
		if onError == nil {
			return fmt.Errorf("%w: WithErrorHandler: the handler is nil", ErrInvalid)
		}
		l.onError = onError
		return nil
	}
}

// WithHeaders selects the rate-limit headers: HeadersDraft, HeadersX,
// both (HeadersDraft|HeadersX, the default), or none (0).
func WithHeaders(style HeaderStyle) Option {
	return func(l *Limiter) error {
		if style&^(HeadersDraft|HeadersX) != 0 {
			return fmt.Errorf("%w: WithHeaders: unknown header style %#x", ErrInvalid, uint8(style))
		}
		l.headers = style
		return nil
	}
}

// WithDryRun makes the Limiter decide and set headers as usual but never
// block: a request that would be denied is passed on to report, or, when
// report is nil, logged; then it is served. Use it to try limits on live
// traffic. Such a request gets no Retry-After, so the t of its RateLimit
// items is not capped by one (see [HeadersDraft]): each is its limit's
// effective window, as on any served request.
func WithDryRun(report func(r *http.Request, d Decision)) Option {
	return func(l *Limiter) error {
		l.dryRun = true
		l.report = report
		return nil
	}
}

// WithQuotaUnit names the unit the Limiter's quotas are counted in: it
// adds the draft's qu parameter to every item of its RateLimit-Policy
// header (RateLimit carries no unit), for every limit of [WithLimits],
// [WithRoutes] and [WithLimitsFunc]:
//
//	RateLimit-Policy: "download";q=10000000;qu="content-bytes";w=3600
//
// Only the units the draft registers are accepted: "content-bytes" when
// [WithCost] weighs a request by its content in bytes (the size of the
// response it asks for, or of the body it uploads), "concurrent-requests"
// for a [Store] that counts requests in flight (the built-in algorithms
// count over a window, not concurrency), and "requests", the default. An
// absent qu means "requests", so WithQuotaUnit("requests") sets no
// parameter: it is accepted so that a unit read from configuration needs
// no special case. Without this option no qu is sent.
//
// A cost that weighs requests (a search 5 units, a read 1) has no
// registered unit: its units are neither requests nor bytes, and the
// draft's registry holds only the three above. Leave qu out and document
// the weights to your clients.
func WithQuotaUnit(unit string) Option {
	return func(l *Limiter) error {
		switch unit {
		case "requests":
			l.unit = ""
		case "content-bytes", "concurrent-requests":
			l.unit = unit
		default:
			return fmt.Errorf("%w: WithQuotaUnit: %q is not a quota unit of the draft; use \"requests\", \"content-bytes\" or \"concurrent-requests\"", ErrInvalid, unit)
		}
		return nil
	}
}

// WithPartitionKey adds the draft's pk parameter, the partition key, to
// every item of RateLimit-Policy and RateLimit, so that a client can tell
// which of its requests draw on one quota:
//
//	RateLimit-Policy: "api";q=100;w=60;pk=:nlzX3hBZLwkHI7A/EwzKvg==:
//	RateLimit: "api";r=42;t=17;pk=:nlzX3hBZLwkHI7A/EwzKvg==:
//
// The key is an RFC 9651 Byte Sequence: the first 16 bytes of the
// HMAC-SHA256, under secret, of the key the request is counted under in
// the store, made of the Limiter's namespace, the route pattern whose
// limits apply, and the [KeyFunc]'s key. Two requests get the same pk
// exactly when they count against the same quota, and a pk never shows
// the client's identifier (an address, a hashed API key, a user): whoever
// reads it cannot test guesses without the secret.
//
// The secret must be at least 16 bytes (for example 32 random bytes from
// the service's secret store) and the same on every instance of the
// service, or a client would see different pks for one quota; changing
// it changes every pk. Use a secret of its own, not that of [Header]. The
// option is off by default and costs nothing then; on, it costs an HMAC
// per request, and the RateLimit-Policy value is made per request.
func WithPartitionKey(secret []byte) Option {
	return func(l *Limiter) error {
		if len(secret) < minSecret {
			return fmt.Errorf("%w: WithPartitionKey: the secret is %d bytes long; at least %d are needed, the same on every instance", ErrInvalid, len(secret), minSecret)
		}
		l.partition = newPartitionKeys(secret)
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
