package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/routesyntax"
)

// Handler returns next wrapped by the Limiter. The ResponseWriter next
// gets is the one the server gave, so all its optional interfaces
// (http.Flusher, http.Hijacker, ...) survive; with [WithCountOnly], one
// that records the status (see there). The request next gets carries the
// decision (see [Decisions]). Handler panics when the Limiter's route
// table is in another router's syntax (see [WithRoutes]), as
// [http.ServeMux] does with a bad pattern: the routes would never match.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if l.routes != nil && l.routes.syntax != routesyntax.ServeMux {
		panic("ratelimit: Handler: the Limiter's routes are in " + l.routes.syntax.String() + "'s syntax; with net/http, build them with WithRoutes")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := l.Allow(w, r)
		if !ok {
			return
		}
		if l.countOnly == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		l.Finish(r, sw.status())
	})
}

// Allow decides r. When r may pass, it sets the rate-limit headers on w
// and returns true with the request to serve: r, or a copy of r whose
// context carries the decision (see [Decisions]). The caller then serves
// that request (and, with [WithCountOnly], calls [Limiter.Finish] with
// it and the status). Otherwise Allow has answered r on w (429, or the
// error handler's answer) and returns false. It is the one decision
// function behind the net/http, Gin and Echo middleware.
func (l *Limiter) Allow(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if l.skip != nil && l.skip(r) {
		return r, true
	}
	p, pattern := l.routePolicy(r)
	if p == nil && l.limitsFunc == nil {
		return r, true // no limits apply: no decision to carry
	}
	r, s := withState(r)
	if pattern != "" && s.matched == "" {
		s.matched = pattern
	}
	p, err := l.funcPolicy(r, p, pattern)
	if err != nil {
		return r, l.fail(w, r, err, Event{Route: pattern})
	}
	if p == nil {
		return r, true
	}
	storeKey, err := l.storeKey(r, p)
	if err != nil {
		return r, l.fail(w, r, err, Event{Route: pattern})
	}
	cost := l.costOf(r)
	var d Decision
	counted := false
	var start time.Time
	if l.observe != nil {
		start = time.Now()
	}
	if l.countOnly != nil {
		d, err = l.store.Peek(r.Context(), storeKey, cost, p.limits) // the response decides whether it spends
		if err == nil && !d.Allowed && l.ban.After > 0 {
			// A denial counts towards a ban only when the store decides it.
			// Allow takes nothing from a key it denies; if the quota came
			// back meanwhile, it takes the cost now, and Finish must not.
			d, err = l.store.Allow(r.Context(), storeKey, cost, p.limits)
			counted = d.Allowed
		}
	} else {
		d, err = l.store.Allow(r.Context(), storeKey, cost, p.limits)
	}
	var latency time.Duration
	if l.observe != nil {
		latency = time.Since(start)
	}
	if err != nil {
		return r, l.fail(w, r, err, Event{Route: pattern, Cost: cost, Latency: latency})
	}
	v := s.add(l, p, d)
	v.counted, v.pk = counted, l.partition.of(storeKey)
	var retry int64 // the Retry-After of a 429, which caps every t
	if !d.Allowed && !l.dryRun {
		retry = retryAfter(d)
	}
	setHeaders(w, l.headers, s, retry)
	if l.observe != nil {
		l.observe(r, Event{Namespace: l.namespace, Route: pattern, Outcome: l.outcomeOf(&d), Cost: cost, Latency: latency, Decision: d})
	}
	if d.Fallback {
		l.counts.fallback.Add(1)
	}
	if d.Allowed {
		l.counts.allowed.Add(1)
		return r, true
	}
	l.counts.denied.Add(1)
	if l.dryRun {
		l.wouldDeny(r, d)
		return r, true
	}
	setRetryAfter(w, s, retry)
	l.deny(w, r, d)
	return r, false
}

// storeKey returns the key the store sees for r under p.
func (l *Limiter) storeKey(r *http.Request, p *policy) (string, error) {
	if l.ip != nil {
		return l.ip.storeKey(r, p.prefix)
	}
	key, err := l.key(r)
	if err != nil {
		return "", err
	}
	return p.storeKey(key), nil
}

// costOf returns r's cost: 1, or what WithCost's function says.
func (l *Limiter) costOf(r *http.Request) int {
	if l.cost == nil {
		return 1
	}
	return l.cost(r)
}

// Reset forgets the counters of r's key under the limits that apply to r,
// for example after a successful login.
func (l *Limiter) Reset(r *http.Request) error {
	p, err := l.policyFor(r)
	if p == nil || err != nil {
		return err
	}
	key, err := l.storeKey(r, p)
	if err != nil {
		return err
	}
	return l.store.Reset(r.Context(), key, p.limits)
}

// Peek returns the decision the store would make now for r's key under
// the limits that apply to r, at r's cost ([WithCost], or 1), without
// spending anything (see [Store.Peek]), for example to tell a client how
// many attempts it has left. It sets no header, and, like Reset, does not
// consult [WithSkip]. When no limits apply to r it returns (Decision{},
// nil) without asking the store.
func (l *Limiter) Peek(r *http.Request) (Decision, error) {
	p, err := l.policyFor(r)
	if p == nil || err != nil {
		return Decision{}, err
	}
	key, err := l.storeKey(r, p)
	if err != nil {
		return Decision{}, err
	}
	return l.store.Peek(r.Context(), key, l.costOf(r), p.limits)
}

// policyFor returns the limits that apply to r, or nil if none do: those
// of WithLimitsFunc when it returns some, else those of r's route, else
// those of WithLimits. The error, wrapping ErrInvalid, says why the limits
// WithLimitsFunc returned are invalid.
func (l *Limiter) policyFor(r *http.Request) (*policy, error) {
	p, pattern := l.routePolicy(r)
	return l.funcPolicy(r, p, pattern)
}

// routePolicy returns the policy of r's route and the route table's
// pattern that matched, or those of WithLimits (nil without) and "".
func (l *Limiter) routePolicy(r *http.Request) (*policy, string) {
	if l.routes != nil {
		if p, pattern := l.routes.find(r); p != nil {
			return p, pattern
		}
	}
	return l.all, ""
}

// funcPolicy returns the policy of the limits WithLimitsFunc gives r
// under the route pattern, or, when it gives none or is not set, p.
func (l *Limiter) funcPolicy(r *http.Request, p *policy, pattern string) (*policy, error) {
	if l.limitsFunc != nil {
		if limits := l.limitsFunc(r); len(limits) > 0 {
			return l.sets.policy(l.namespace, pattern, limits, l.ban, l.unit)
		}
	}
	return p, nil
}

// fail logs err, tells the observer (e holds what is known of the
// request: its route, and its cost and the store's latency once asked)
// and hands r to the error handler. A request whose context ended before
// the store decided is no store failure: it is counted apart and not
// logged.
func (l *Limiter) fail(w http.ResponseWriter, r *http.Request, err error, e Event) bool {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		l.counts.canceled.Add(1)
		l.observeFailure(r, Canceled, err, e)
		return l.onError(w, r, err)
	}
	kind, msg, level := logStoreError, "ratelimit: store failed", slog.LevelError
	if isRequestError(err) {
		kind, msg, level = logRequestError, "ratelimit: request not decided", slog.LevelWarn
		l.counts.badRequests.Add(1)
		l.observeFailure(r, BadRequest, err, e)
	} else {
		l.counts.storeErrors.Add(1)
		l.observeFailure(r, StoreError, err, e)
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
