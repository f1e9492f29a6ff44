package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/internal/finish"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// The top of the request's path, in the order it runs: Handler, Allow,
// Finish, End, Peek and Reset, and the state a request carries. It calls
// down into routes.go, keyfunc.go, overrides.go, the Store and
// response.go; nothing there calls back.

// A Limiter is HTTP middleware that decides, for every request, whether it
// may pass. It takes the request's key (see [KeyFunc]), asks its [Store]
// about the limits that apply (see [WithLimits] and [WithRoutes]), sets
// the rate-limit headers, and either lets the request through or answers
// it: 429 when denied, the error handler's answer when it cannot decide.
//
// Use [Limiter.Handler] with net/http; the Gin and Echo adapters call
// [Limiter.Allow] and [Limiter.Finish]. Build one with [New]: the zero
// Limiter is not usable. A Limiter is safe for concurrent use; its
// configuration never changes after New.
type Limiter struct {
	store     Store
	namespace string
	keyFunc   KeyFunc // nil: the connection's peer, appended in place
	costFunc  func(Request) int
	skip      func(Request) bool
	deny      func(http.ResponseWriter, *http.Request, Decision)
	onError   func(http.ResponseWriter, *http.Request, error) bool
	// failClosed is set when onError is FailClosed: outside HTTP, where
	// no handler answers, a store's failure then refuses the request.
	failClosed bool
	headers    Headers
	partition  *partitionKeys          // of Headers.PartitionKey; nil: no pk
	report     func(Request, Decision) // of WithDryRun; nil: log
	observe    func(Request, Event)    // of WithObserver; nil without
	logger     *slog.Logger
	logs       logThrottle
	countOnly  func(status int) bool // of WithCountOnly; nil: count every request
	base       policyBase            // what every policy takes from the options (WithBan's ban)

	all    *policy     // the limits of WithLimits; nil without
	routes *routeTable // the table of WithRoutes; nil without

	limitsFunc func(Request) []Limit           // of WithLimitsFunc; nil without
	sets       bounded.Map[setKey, checkedSet] // the sets limitsFunc returned, checked

	overrides      Overrides                              // of WithOverrides; nil without
	overriddenSets bounded.Map[overriddenKey, checkedSet] // the policies in force under them

	// What the options gave, until New turns it into policies.
	given struct {
		limits []Limit
		routes map[string][]Limit
	}
}

// Handler returns next wrapped by the Limiter. The ResponseWriter next
// gets is the one the server gave, so all its optional interfaces
// (http.Flusher, http.Hijacker, ...) survive; with [WithCountOnly], one
// that reports the status to [Limiter.Finish] as the header is written
// (see there). The request next gets carries the decision (see
// [Decisions]).
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := l.Allow(w, r)
		if !ok {
			return
		}
		if e, d := stateOf(r.Context()).decidedBy(l); e == nil || !e.ends(d) {
			next.ServeHTTP(w, r)
			return
		}
		defer l.End(r.Context()) // however the handler returns: a panic too
		if l.countOnly == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &finish.Writer{ResponseWriter: w, Finisher: finish.Finisher{Limiter: l, Request: r}}
		next.ServeHTTP(sw, r)
		sw.Finish(http.StatusOK) // a handler that wrote nothing answers 200
	})
}

// Allow decides r, as [Limiter.Decide] does, and answers it on w: it
// sets the rate-limit headers and, when r may pass, returns true with the
// request to serve: r, or a copy of r whose context carries the decision
// (see [Decisions]) and whose Pattern is the route pattern the Limiter's
// table matched, when r had none. The caller then serves that request
// (and, with [WithCountOnly], calls [Limiter.Finish] with it and the
// status as the response's header is about to be written). Otherwise
// Allow has answered r on w (429 from the deny handler, or the error
// handler's answer) and returns false. It is the HTTP edge: the net/http,
// Gin and Echo middleware call it.
func (l *Limiter) Allow(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if l.skip != nil && l.skip(r) {
		return r, true
	}
	p, pattern := l.routePolicy(r)
	if p == nil && l.limitsFunc == nil {
		return r, true // no limits apply: no decision to carry
	}
	r, s := withState(r, pattern)
	v := l.decide(r, s, p, pattern, w.Header())
	switch {
	case v.Err != nil:
		return r, l.onError(w, r, v.Err)
	case v.Allowed:
		return r, true
	}
	setRetryAfter(w, &s.responseState, retryAfterSeconds(v.Decision))
	l.deny(w, r, v.Decision)
	return r, false
}

// A Verdict is a Limiter's answer to one request, as a value, before
// anything is written: whether it may go on, what was decided, why it
// may not, and what to tell the client. [Limiter.Decide] returns one for
// any [Request]; [Limiter.Allow] writes the HTTP answer of the same;
// grpclimit maps it onto a gRPC status. The zero Verdict lets nothing
// through.
type Verdict struct {
	// Allowed reports whether the request may go on: every limit admitted
	// it, Shadow limits alone would deny it, or no limit applies. When the
	// Limiter could not decide (Err), a request that cannot be counted
	// never goes on; one the store failed to decide does, unless the error
	// handler is [FailClosed].
	Allowed bool

	// Decision is the Limiter's decision: the store's, or a blocked key's
	// denial; for a request that Shadow limits alone would deny, the
	// decision of its other limits. The zero Decision when it made none.
	Decision Decision

	// Err is why the Limiter could not decide: the request cannot be
	// counted (no key, an invalid cost or limits: it wraps [ErrInvalid],
	// and [Verdict.Missing] may say what is missing), or the store failed.
	// Its text may hold the request's values: log it, never send it.
	Err error

	// RetryAfter is, for a request that may not go on, when the client
	// may try again, in whole seconds as Retry-After says it: a denial's
	// wait, rounded up, or a second for a store failing closed; 0
	// otherwise.
	RetryAfter time.Duration

	// Key is the client's key the request was counted under, as the key
	// function made it ("ip:192.0.2.1", "header:X-Api-Key:" and a hash):
	// the subject of a refusal, never a secret of the client's. Empty
	// when none was made.
	Key string

	// Missing is, for a request that cannot be counted for want of a
	// field a built-in key function reads, that field's name, as the
	// request's Header names it ("X-Api-Key"): safe to tell the client.
	// Empty otherwise.
	Missing string

	// Fields are the rate-limit fields the Limiter would send on the
	// response, as HTTP names them (Ratelimit, Ratelimit-Policy,
	// X-Ratelimit-*, Retry-After, X-Ratelimit-Shadow), those [Headers]
	// selects. Nil from Allow, which sets them on the response.
	Fields http.Header

	// Context is the request's context, carrying the decision: serve the
	// request with it ([Decisions] reads it), and give it to [Charge],
	// [Limiter.Finish] and [Limiter.End].
	Context context.Context
}

// Decide decides r, whatever carries it, and returns the Verdict,
// writing nothing: the limits of its route ([Request].Route: matched
// over HTTP as [WithRoutes] says, otherwise exactly, or as a path whose
// last segment a wildcard stands for), its plan ([WithLimitsFunc]), its
// key (the key function's, or [Key]'s), the overrides in force, Shadow
// limits, bans, the observer and the log, as [Limiter.Allow] does. When
// the Verdict is Allowed, serve the request with its Context, and once
// it is done, however it ends, call [Limiter.End] with that Context: it
// gives back slots of [Concurrent] limits and charges usage reported
// with [Charge]. grpclimit calls it for every call; call it for work
// outside any transport, by [Key] (see its example, and docs/decide.md).
func (l *Limiter) Decide(r Request) Verdict {
	ctx := r.Context()
	if l.skip != nil && l.skip(r) {
		return Verdict{Allowed: true, Context: ctx}
	}
	p, pattern := l.routePolicy(r)
	if p == nil && l.limitsFunc == nil {
		return Verdict{Allowed: true, Context: ctx}
	}
	var req Request
	var s *requestState
	if hr, ok := r.(*http.Request); ok {
		req, s = withState(hr, pattern)
	} else {
		if s = stateOf(ctx); s == nil {
			s = newState(ctx)
		}
		s.inner, req = r, s
	}
	hdr := http.Header{}
	return l.verdict(l.decide(req, s, p, pattern, hdr), s, hdr)
}

// verdict completes v for a caller outside HTTP: the error handler's
// choice, and the fields set on hdr.
func (l *Limiter) verdict(v Verdict, s *requestState, hdr http.Header) Verdict {
	if v.Err != nil {
		v.Allowed = !errors.Is(v.Err, ErrInvalid) && !l.failClosed
		if !v.Allowed && !errors.Is(v.Err, ErrInvalid) {
			v.RetryAfter = time.Second
			hdr[wire.FieldRetryAfter] = s.headerValue("1")
		}
	} else if !v.Allowed {
		hdr[wire.FieldRetryAfter] = s.headerValue(strconv.FormatInt(retryAfterSeconds(v.Decision), 10))
	}
	if len(hdr) > 0 {
		v.Fields = hdr
	}
	return v
}

// decide is the one decision behind every edge: it decides req under p
// (its route's policy, nil for none), sets the rate-limit fields on hdr,
// counts, observes and logs; it writes no answer.
func (l *Limiter) decide(req Request, s *requestState, p *policy, pattern string, hdr http.Header) Verdict {
	ctx := req.Context()
	v := Verdict{Context: ctx}
	p, err := l.funcPolicy(req, p, pattern)
	if err != nil {
		v.Err = err
		l.fail(req, err, Event{Route: pattern})
		return v
	}
	if p == nil {
		v.Allowed = true
		return v
	}
	var key string
	var cost int
	if k, ok := s.inner.(*keyRequest); ok && req == Request(s) {
		key, cost = storeKeyOf(p.prefix, k.key, &s.buf), k.cost
	} else if key, err = storeKey(req, l.keyFunc, p.prefix, &s.buf); err != nil {
		v.Err = err
		v.Missing = missingField(err)
		l.fail(req, err, Event{Route: pattern})
		return v
	} else {
		cost = l.costOf(req)
	}
	v.Key = key[len(p.prefix):]
	if l.overrides != nil {
		if p = l.overridden(ctx, p, key); p == nil {
			v.Allowed = true // unlimited
			return v
		}
	}
	if err := p.checkCost(cost); err != nil {
		v.Err = err
		l.fail(req, err, Event{Route: pattern, Cost: cost})
		return v
	}
	var start time.Time
	if l.observe != nil {
		start = time.Now()
	}
	var shadowed *Decision // the denial of Shadow limits alone, when they deny
	p, shadowed, err = l.ask(ctx, p, key, cost, &v.Decision)
	wouldDeny := shadowed != nil && (v.Decision.Allowed || p.shadows)
	var latency time.Duration
	if l.observe != nil {
		latency = time.Since(start)
	}
	if err != nil {
		s.undecided = p // for FailClosed's violated-policies
		v.Decision = Decision{}
		v.Err = err
		l.fail(req, err, Event{Route: pattern, Cost: cost, Latency: latency})
		return v
	}
	d := &v.Decision
	s.decisions = append(s.decisions, limiterDecision{policy: p, decision: *d, pk: l.partition.of(key)})
	s.endings = append(s.endings, ending{limiter: l, pattern: pattern, key: key, cost: cost})
	var retry int64 // the Retry-After of a refusal, which caps the t of each limit that denied
	if !d.Allowed && !wouldDeny {
		retry = retryAfterSeconds(*d)
	}
	s.responseHeader = hdr
	setHeaders(hdr, l.headers, &s.responseState, retry)
	if l.observe != nil {
		e := Event{Namespace: l.namespace, Route: pattern, Outcome: outcomeOf(d, wouldDeny), Cost: cost, Latency: latency, Decision: *d}
		if wouldDeny {
			e.Decision = *shadowed
		}
		l.observe(req, e)
	}
	switch {
	case wouldDeny:
		l.tellDenied(p, key, shadowed, true)
		l.wouldDeny(req, hdr, *shadowed)
		v.Allowed = true
	case d.Allowed:
		v.Allowed = true
	default:
		l.tellDenied(p, key, d, false)
		v.RetryAfter = time.Duration(min(retry, math.MaxInt64/int64(time.Second))) * time.Second
	}
	return v
}

// ask sets d to the store's decision on key at cost under p (a blocked
// p's denial without the store). When Shadow limits alone deny, it
// returns that denial and sets d to the decision of the limits that are
// not Shadow, whose policy it returns. d is the caller's: no copy.
func (l *Limiter) ask(ctx context.Context, p *policy, key string, cost int, d *Decision) (*policy, *Decision, error) {
	if p.blocked {
		*d = blockedDecision(p)
		return p, nil, nil
	}
	var err error
	*d, err = l.store.Allow(ctx, key, cost, p.set)
	if err == nil && p.usage && d.Slot != "" {
		heldUntilCharged(d)
	}
	if err != nil || !p.shadows || !shadowOnly(p, d) {
		return p, nil, err
	}
	shadowed := new(Decision)
	*shadowed = *d
	if p.enforced == nil {
		return p, shadowed, nil
	}
	*d, err = l.store.Allow(ctx, key, cost, p.enforced.set)
	return p.enforced, shadowed, err
}

// heldUntilCharged says, of each limit charged from usage that d
// admitted holding the cost, that it is not full again before a window:
// the hold is charged when the request ends, and the charge starts the
// window afresh. A store tells when what it counts ends (for a fixed
// window with nothing charged yet, now), not what it holds.
// Results the store shared are copied before they change.
func heldUntilCharged(d *Decision) {
	copied := d.n <= len(d.one) // one result lives in d itself
	for i, r := range d.results() {
		if !r.Limit.Usage || !r.Allowed || r.ResetAfter >= r.Window {
			continue
		}
		if !copied {
			d.more, copied = append([]Result(nil), d.more...), true
		}
		d.results()[i].ResetAfter = r.Window
	}
}

// routePolicy returns the policy of r's route and the route table's
// pattern that matched (see routeTable.match and matchRoute), or those
// of WithLimits (nil without) and "".
func (l *Limiter) routePolicy(r Request) (*policy, string) {
	var rt route
	var ok bool
	if hr, isHTTP := r.(*http.Request); isHTTP {
		rt, ok = l.routes.match(hr)
	} else {
		rt, ok = l.routes.matchRoute(routeOf(r))
	}
	if ok {
		return rt.policy, rt.pattern
	}
	return l.all, ""
}

// funcPolicy returns the policy of the limits WithLimitsFunc gives r
// under the route pattern, or p when it gives none or is not set.
func (l *Limiter) funcPolicy(r Request, p *policy, pattern string) (*policy, error) {
	if l.limitsFunc == nil {
		return p, nil
	}
	limits := l.limitsFunc(r)
	if len(limits) == 0 {
		return p, nil
	}
	if len(limits) > maxSetLimits {
		return nil, fmt.Errorf("%w: WithLimitsFunc returned %d limits; at most %d are allowed", ErrInvalid, len(limits), maxSetLimits)
	}
	k := setKey{pattern: pattern, n: len(limits)}
	copy(k.limits[:], limits)
	c := l.sets.Get(k)
	if c.problem != "" {
		return nil, fmt.Errorf("%w: WithLimitsFunc returned invalid limits: %s", ErrInvalid, c.problem)
	}
	return c.p, nil
}

// The sets of WithLimitsFunc: at most maxSetLimits limits each, and at
// most maxSets kept; past that a new one is checked on each request.
const (
	maxSetLimits = 8
	maxSets      = 1024
)

// setKey names a set of limits under one route's scope.
type setKey struct {
	pattern string
	n       int
	limits  [maxSetLimits]Limit
}

// checkedSet is a set's policy, or what is wrong with it.
type checkedSet struct {
	p       *policy
	problem string
}

// checkCost refuses a cost below 1, or one that a limit of p taking it
// could never hold, naming that limit for the client, before the store
// is asked (which would refuse it too, in words for the log).
func (p *policy) checkCost(cost int) error {
	if cost == 1 {
		return nil // every limit holds 1
	}
	if cost < 1 {
		return &requestError{detail: fmt.Sprintf("its cost, %d, is below 1", cost)}
	}
	for _, l := range p.set.limits {
		if l.Cost == 0 && l.Algorithm != Concurrent && cost > l.capacity() {
			return &requestError{detail: fmt.Sprintf("its cost, %d, is more than the limit %q ever holds, %d", cost, l.Name, l.capacity())}
		}
	}
	return nil
}

// costOf returns r's cost: 1, or what WithCost's function says.
func (l *Limiter) costOf(r Request) int {
	if l.costFunc == nil {
		return 1
	}
	return l.costFunc(r)
}

// fail logs err, a failure to decide req, and tells the observer what e
// knows of it. A request whose context ended first is not logged.
func (l *Limiter) fail(req Request, err error, e Event) {
	ctx := req.Context()
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		l.observeFailure(req, outcomeCanceled, err, e)
		return
	}
	kind, msg, level := logStoreError, "ratelimit: store failed", slog.LevelError
	if errors.Is(err, ErrInvalid) {
		kind, msg, level = logRequestError, "ratelimit: request not decided", slog.LevelWarn
		l.observeFailure(req, outcomeBadRequest, err, e)
	} else {
		l.observeFailure(req, outcomeStoreError, err, e)
	}
	if ok, dropped := l.logs.allow(kind); ok {
		l.logger.LogAttrs(ctx, level, msg, what(req, slog.String("error", err.Error()), slog.Int64("suppressed", dropped))...)
	}
}

// what describes req for a log line, after attrs: an HTTP request's
// method and path, another's route.
func what(req Request, attrs ...slog.Attr) []slog.Attr {
	if r, ok := req.(*http.Request); ok {
		return append(attrs, slog.String("method", r.Method), slog.String("path", r.URL.Path))
	}
	return append(attrs, slog.String("call", routeOf(req)))
}

// observeFailure tells the observer, if any, that r was not decided.
func (l *Limiter) observeFailure(r Request, outcome string, err error, e Event) {
	if l.observe != nil {
		e.Namespace, e.Outcome, e.Err = l.namespace, outcome, err
		l.observe(r, e)
	}
}

// outcomeOf returns the outcome of a decision d the store made, which
// Shadow limits alone would have denied when wouldDeny.
func outcomeOf(d *Decision, wouldDeny bool) string {
	switch {
	case wouldDeny:
		return outcomeWouldDeny
	case d.Allowed:
		return outcomeAllowed
	case d.Banned > 0:
		return outcomeBanned
	}
	return outcomeDenied
}

// shadowOnly reports whether d, a decision under p, denied and only
// Shadow limits denied it; or, when every limit of p is Shadow, whether
// d denied at all (a ban's denial too).
func shadowOnly(p *policy, d *Decision) bool {
	if d.Allowed {
		return false
	}
	return p.enforced == nil || onlyShadowDenied(d) && d.Banned == 0
}

// onlyShadowDenied reports whether every limit that denied d is Shadow.
func onlyShadowDenied(d *Decision) bool {
	for _, r := range d.results() {
		if !r.Allowed && !r.Limit.Shadow {
			return false
		}
	}
	return true
}

// wouldDeny reports a request that Shadow limits alone would have
// denied (d says which), and that is served: to WithDryRun's report, or
// to the log; and, with Headers.Shadow, in the field set on hdr.
func (l *Limiter) wouldDeny(r Request, hdr http.Header, d Decision) {
	if l.headers.Shadow {
		var names []string
		for _, res := range d.results() {
			if !res.Allowed {
				names = append(names, quoteString(res.Limit.Name))
			}
		}
		hdr[wire.FieldShadow] = []string{strings.Join(names, ", ")}
	}
	if l.report != nil {
		l.report(r, d)
		return
	}
	if ok, dropped := l.logs.allow(logDryRun); ok {
		l.logger.LogAttrs(r.Context(), slog.LevelInfo, "ratelimit: a shadow limit would deny",
			what(r, slog.String("limit", deniedBy(d).Limit.String()), slog.Duration("retry_after", d.RetryAfter), slog.Int64("suppressed", dropped))...)
	}
}

// deniedBy returns the result of the limit that denied d and lets the
// request through last (the longest RetryAfter); the zero Result when d
// allowed.
func deniedBy(d Decision) Result {
	var r Result
	for _, x := range d.results() {
		if !x.Allowed && (r.Limit == (Limit{}) || x.RetryAfter > r.RetryAfter) {
			r = x
		}
	}
	return r
}

// Finish reports the status of the response to the request whose
// context is ctx (that of the request Allow returned, or a Verdict's
// Context) to a Limiter built with [WithCountOnly], which decides by it
// whether the request's usage is its cost or nothing; otherwise it does
// nothing, as it does when called again for the request. Call it as the
// response's header is about to be written: [Limiter.Handler] does, and
// so do the adapters. Then the RateLimit and X-RateLimit headers Allow
// set are written anew, so that a counted response says what remains
// after it. The usage is charged when the request ends (see
// [Limiter.End]). It returns no error: it asks no store.
func (l *Limiter) Finish(ctx context.Context, status int) error {
	if l.countOnly == nil {
		return nil
	}
	s := stateOf(ctx)
	e, d := s.decidedBy(l)
	if e == nil || e.finished || !e.ends(d) {
		return nil
	}
	e.finished, e.counts = true, l.countOnly(status)
	s.expect(e, d)
	return nil
}

// End ends the request whose context is ctx for the Limiter (that of
// the request Allow returned, or a Verdict's Context), once it is done,
// however it ended: a deferred call runs on a panic, a client gone away,
// a hijacked connection. When the Limiter admitted the request under a
// [Concurrent] limit, or under limits charged from usage (see
// [Limit].Usage, and [WithCountOnly]), it gives back the request's slot
// and charges its usage in one store call (see [Store].End): what the
// handler reported with [Charge], else its cost; with WithCountOnly,
// that or nothing, as Finish was told. Otherwise it does nothing, as it
// does when called again. [Limiter.Handler] calls it, and so do the
// adapters.
//
// The store is asked even when ctx has ended: a client that went away
// still used what it used. A failure is logged and returned: the
// response is done, so no error handler runs.
func (l *Limiter) End(ctx context.Context) error {
	s := stateOf(ctx)
	e, d := s.decidedBy(l)
	if e == nil || e.ended || !e.ends(d) {
		return nil
	}
	e.ended = true
	usage, slot := 0, e.stored(d).Slot
	if d.policy.usage {
		usage = max(e.used()-e.charged(), 0)
	}
	var more []moreHeld
	if e.past != nil {
		more = e.past.more
	}
	if usage == 0 && slot == "" && len(more) == 0 {
		return nil // nothing to charge or give back
	}
	var start time.Time
	if l.observe != nil {
		start = time.Now()
	}
	// What a stream got more settles apart, each hold taking the usage
	// past those before it; the last, what remains.
	first := usage
	if len(more) > 0 {
		first = min(usage, e.cost)
	}
	ended := context.WithoutCancel(ctx)
	charged, err := l.store.End(ended, e.key, first, d.policy.set, *e.stored(d))
	rest := usage - first
	for i, m := range more {
		part := min(rest, m.units)
		if i == len(more)-1 {
			part = rest
		}
		rest -= part
		if _, err2 := l.store.End(ended, e.key, part, d.policy.more, m.d); err == nil {
			err = err2
		}
	}
	var latency time.Duration
	if l.observe != nil {
		latency = time.Since(start)
	}
	req := s.request()
	if err != nil {
		l.logEndError(ctx, req, "charging a response", usage, err)
		l.observeFailure(req, outcomeStoreError, err, Event{Route: e.pattern, Cost: usage, Latency: latency})
		return fmt.Errorf("ratelimit: charging the response: %w", err)
	}
	if l.observe != nil && usage > 0 {
		l.observe(req, Event{Namespace: l.namespace, Route: e.pattern, Outcome: outcomeCharged, Cost: usage, Latency: latency, Decision: charged})
	}
	return nil
}

// logEndError logs, throttled, a store's failure doing something for the
// request req: ending it, or charging a stream.
func (l *Limiter) logEndError(ctx context.Context, req Request, doing string, usage int, err error) {
	if ok, dropped := l.logs.allow(logStoreError); ok {
		l.logger.LogAttrs(ctx, slog.LevelError, "ratelimit: store failed "+doing,
			what(req, slog.String("error", err.Error()), slog.Int("usage", usage), slog.Int64("suppressed", dropped))...)
	}
}

// Charge adds units to the usage of the request whose context is ctx, for
// each Limiter that admitted it under limits charged from usage (see
// [Limit].Usage): tokens generated, bytes sent, query points. Until the
// handler calls Charge, a request's usage is its cost (1, or what
// [WithCost] says); after, the sum of what it reported, 0 included. A
// negative number counts as 0.
//
// Usage within the cost reserved at admission is charged when the
// request ends ([Limiter.End]); usage past it goes to the store at once,
// held if the limits have room, else charged as debt. Charge reports
// whether the request holds all it has used: false once a limit had no
// room for more, and from then on, so that a stream stops cleanly. If
// the response's header is not written yet, its rate-limit fields are
// written anew to say what remains: call Charge where the handler may
// set the header, from its goroutine. It does nothing, and returns true,
// for a request no such Limiter admitted. See docs/limits.md.
func Charge(ctx context.Context, units int) bool {
	s := stateOf(ctx)
	if s == nil {
		return true
	}
	units = max(units, 0)
	holds := true
	for i := range s.endings {
		e, d := &s.endings[i], &s.decisions[i]
		if e.ended || !e.ends(d) || !d.policy.usage {
			continue
		}
		if !e.reported {
			e.reported, e.usage = true, 0
		}
		e.usage = min(e.usage+units, wire.MaxQuota) // a count a script keeps exact
		if !e.spend(ctx, s, d) {
			holds = false
		}
		s.expect(e, d)
	}
	return holds
}

// Peek returns the decision the store would make now for r's key under
// the limits that apply to r, at r's cost ([WithCost], or 1), without
// spending anything (see [Store.Peek]), for example to tell a client how
// many attempts it has left. It sets no header, and, like Reset, does not
// consult [WithSkip]. When no limits apply to r it returns (Decision{},
// nil) without asking the store.
func (l *Limiter) Peek(r Request) (Decision, error) {
	p, err := l.policyFor(r)
	if p == nil || err != nil {
		return Decision{}, err
	}
	key, cost, err := l.keyOf(r, p)
	if err != nil {
		return Decision{}, err
	}
	if l.overrides != nil {
		if p = l.overridden(r.Context(), p, key); p == nil {
			return Decision{}, nil // unlimited
		} else if p.blocked {
			return blockedDecision(p), nil
		}
	}
	return l.store.Peek(r.Context(), key, cost, p.set)
}

// keyOf returns r's key and cost under p, outside a decision.
func (l *Limiter) keyOf(r Request, p *policy) (string, int, error) {
	var b strings.Builder
	if k, ok := r.(*keyRequest); ok {
		return storeKeyOf(p.prefix, k.key, &b), k.cost, nil
	}
	key, err := storeKey(r, l.keyFunc, p.prefix, &b)
	return key, l.costOf(r), err
}

// Reset forgets the counters of r's key under the limits that apply to r,
// for example after a successful login.
func (l *Limiter) Reset(r Request) error {
	p, err := l.policyFor(r)
	if p == nil || err != nil {
		return err
	}
	key, _, err := l.keyOf(r, p)
	if err != nil {
		return err
	}
	if l.overrides != nil {
		// The state of the limits in force too, where an override's window
		// keeps it apart.
		if q := l.overridden(r.Context(), p, key); q != nil && q != p && !q.blocked {
			if err := l.store.Reset(r.Context(), key, q.set); err != nil {
				return err
			}
		}
	}
	return l.store.Reset(r.Context(), key, p.set)
}

// policyFor returns the limits that apply to r, or nil if none do: those
// of WithLimitsFunc when it returns some, else those of r's route, else
// those of WithLimits. The error, wrapping ErrInvalid, says why the limits
// WithLimitsFunc returned are invalid.
func (l *Limiter) policyFor(r Request) (*policy, error) {
	p, pattern := l.routePolicy(r)
	return l.funcPolicy(r, p, pattern)
}

// requestState is what the Limiters that see a request keep in its
// context: what its response is written from (see responseState) and,
// for each decision, at the same index, what ends the request for its
// Limiter. It is the request's context itself and holds the copy of the
// request that carries it, so that both cost one allocation.
type requestState struct {
	parent context.Context // the request's context before the state
	responseState
	endings []ending     // endings[i] is of decisions[i]
	one     [1]ending    // endings' first array: one Limiter's; a second moves it
	req     http.Request // over HTTP, the copy of the request that carries the state
	// inner is, outside HTTP, the Request decided: the state is then the
	// Request the Limiter's functions read, saying what inner says, with
	// the state as its context.
	inner Request
}

// A requestState is a context.Context: its parent's, which answers
// stateKey and responseKey.
func (s *requestState) Deadline() (time.Time, bool) { return s.parent.Deadline() }
func (s *requestState) Done() <-chan struct{}       { return s.parent.Done() }
func (s *requestState) Err() error                  { return s.parent.Err() }

// A requestState outside HTTP is the Request its functions read (see
// inner).
func (s *requestState) Context() context.Context    { return s }
func (s *requestState) Header(name string) []string { return headerOf(s.inner, name) }
func (s *requestState) Peer() netip.AddrPort        { return peerOf(s.inner) }
func (s *requestState) Route() string               { return routeOf(s.inner) }

// request returns the Request the state is of.
func (s *requestState) request() Request {
	if s.inner != nil {
		return s
	}
	return &s.req
}

// newState returns the state of a request whose context is ctx.
func newState(ctx context.Context) *requestState {
	s := &requestState{parent: ctx}
	s.decisions = s.responseState.one[:0]
	s.endings = s.one[:0]
	return s
}

// ending is what a Limiter keeps of a request it decided, to end it:
// Finish, Charge and End read it.
type ending struct {
	limiter  *Limiter
	pattern  string // the route table's pattern; "" outside it
	key      string // the store's key
	cost     int
	admitted *Decision // the store's decision, kept by expect; nil before

	// The request's usage, for limits charged from usage.
	usage    int
	reported bool // Charge was called: usage is what it was told
	finished bool // Finish was told the status
	counts   bool // and WithCountOnly's function passed it
	ended    bool // End charged it, or had nothing to charge

	// What a stream's Charge asked of the store past the cost reserved at
	// admission; nil until it went past it, so that a request that does
	// not costs nothing more.
	past *pastReserved
}

// pastReserved is what a stream's Charge asked of the store past the cost
// reserved at admission: the holds it got, the usage it charged at once,
// and whether the store said no.
type pastReserved struct {
	more    []moreHeld
	charged int
	refused bool
}

// moreHeld is units more that a stream holds under the store's decision
// d, which End settles.
type moreHeld struct {
	d     Decision
	units int
}

// held returns the units the request holds in its limits charged from
// usage: its cost, reserved at admission when the store reserves (its
// decision names a slot), and what it got more; 0 when nothing was
// reserved, and all its usage is charged at the end.
func (e *ending) held(d *limiterDecision) int {
	if e.stored(d).Slot == "" {
		return 0
	}
	n := e.cost
	if e.past != nil {
		for _, m := range e.past.more {
			n += m.units
		}
	}
	return n
}

// refused reports whether the store said no to holding more.
func (e *ending) refused() bool { return e.past != nil && e.past.refused }

// charged returns the usage charged while the request ran.
func (e *ending) charged() int {
	if e.past == nil {
		return 0
	}
	return e.past.charged
}

// spend keeps the request's usage within what it holds, or charges the
// store at once with the rest: past what it holds, it asks to hold more
// (its cost again, or the excess if larger, at most a limit's capacity),
// as a request of its own of the limits charged from usage alone; the
// excess the store will not hold is charged at once, as debt. It
// reports whether the request holds all it used. A request that reserved
// nothing is charged at the end, and spend does nothing.
func (e *ending) spend(ctx context.Context, s *requestState, d *limiterDecision) bool {
	held := e.held(d)
	more := d.policy.more
	need := e.used() - e.charged() - held
	if held == 0 || more == nil || need <= 0 {
		return !e.refused()
	}
	if e.past == nil {
		e.past = new(pastReserved)
	}
	p, l := e.past, e.limiter
	if !p.refused {
		ask := min(max(need, e.cost), d.policy.moreMax)
		got, err := l.store.Allow(ctx, e.key, ask, more)
		switch {
		case err != nil:
			p.refused = true
			if ctx.Err() == nil { // not a client gone away
				l.logEndError(ctx, s.request(), "asking for more for a stream", ask, err)
			}
		case admits(got):
			p.more = append(p.more, moreHeld{got, ask})
			need -= ask
		default:
			p.refused = true
		}
	}
	if need > 0 {
		charged, err := l.store.End(context.WithoutCancel(ctx), e.key, need, more, Decision{})
		if err != nil {
			l.logEndError(ctx, s.request(), "charging a stream", need, err) // End charges it
		} else {
			p.charged += need
			if l.observe != nil {
				l.observe(s.request(), Event{Namespace: l.namespace, Route: e.pattern, Outcome: outcomeCharged, Cost: need, Decision: charged})
			}
		}
	}
	return !p.refused
}

// admits reports whether d, a decision of limits charged from usage,
// admits: every limit that denied is Shadow.
func admits(d Decision) bool { return d.n > 0 && onlyShadowDenied(&d) }

// ends reports whether the request ends with a store call: d, its
// decision, admitted it under limits charged from usage, or holds a slot.
func (e *ending) ends(d *limiterDecision) bool {
	return (d.policy.usage || d.policy.slot) && e.stored(d).Allowed
}

// stored returns the store's decision, of which d is the decision.
func (e *ending) stored(d *limiterDecision) *Decision {
	if e.admitted != nil {
		return e.admitted
	}
	return &d.decision
}

// used returns the usage to charge: what Charge reported, else the cost;
// with WithCountOnly, nothing when the status (200 until Finish says)
// does not count.
func (e *ending) used() int {
	if count := e.limiter.countOnly; count != nil {
		if !e.finished && !count(http.StatusOK) || e.finished && !e.counts {
			return 0 // before Finish, as for a handler that has written nothing yet
		}
	}
	if e.reported {
		return e.usage
	}
	return e.cost
}

// expect sets d, e's decision, to what the store will hold once e's
// usage so far is charged, and the fields to say so while the header is
// not sent.
func (s *requestState) expect(e *ending, d *limiterDecision) {
	if e.admitted == nil {
		stored := d.decision
		e.admitted = &stored
	}
	used, held := e.used(), 0
	if e.admitted.Slot != "" {
		held = e.cost // reserved at admission, given back when the usage is charged
	}
	var buf [4]Result
	rs := buf[:0]
	for _, r := range e.admitted.results() {
		if r.Limit.Usage {
			r.Remaining = max(r.Remaining+held-used, 0)
		}
		if r.Limit.Usage && used > 0 {
			r.ResetAfter = max(r.ResetAfter, r.Window) // nothing spent yet: the charge starts it afresh
		}
		rs = append(rs, r)
	}
	expected := MakeDecision(rs...)
	expected.Fallback, expected.Banned = e.admitted.Fallback, e.admitted.Banned
	d.decision = expected
	if s.responseHeader != nil {
		setHeaders(s.responseHeader, e.limiter.headers, &s.responseState, 0)
	}
}

// stateKey is the context key of a requestState.
var stateKey = new(int)

// Value answers stateKey with s and responseKey with its responseState.
func (s *requestState) Value(key any) any {
	switch key {
	case stateKey:
		return s
	case responseKey:
		return &s.responseState
	}
	return s.parent.Value(key)
}

// decidedBy returns the last decision l took on the request and its
// ending, or nils.
func (s *requestState) decidedBy(l *Limiter) (*ending, *limiterDecision) {
	if s != nil {
		for i := len(s.endings) - 1; i >= 0; i-- {
			if s.endings[i].limiter == l {
				return &s.endings[i], &s.decisions[i]
			}
		}
	}
	return nil, nil
}

// stateOf returns the requestState of a request's context, or nil.
func stateOf(ctx context.Context) *requestState {
	s, _ := ctx.Value(stateKey).(*requestState)
	return s
}

// withState returns r and its requestState, adding one to a copy of r
// when it has none, with pattern when r has no Pattern.
func withState(r *http.Request, pattern string) (*http.Request, *requestState) {
	if s := stateOf(r.Context()); s != nil {
		if pattern != "" && r.Pattern == "" {
			if r != &s.req {
				r = r.WithContext(s)
			}
			r.Pattern = pattern
		}
		return r, s
	}
	s := newState(r.Context())
	// The copy lives in s, so that the state and the request that carries
	// it cost one allocation: WithContext's own copy does not escape.
	s.req = *r.WithContext(s)
	if s.req.Pattern == "" {
		s.req.Pattern = pattern
	}
	return &s.req, s
}

// Decisions returns the decisions of the Limiters that decided the
// request whose context is ctx, in the order they ran: with a global
// Limiter and a route's, two. A handler reads them, for example to tell
// the client what it has left. A dry-run Limiter's decision is there even when it would have denied; a
// Limiter that skipped the request, had no limits for it, or could not
// decide added none. With Gin and Echo, pass c.Request.Context() and
// c.Request().Context(): the adapters hand the handler the request that
// carries them. The slice is the caller's.
func Decisions(ctx context.Context) []Decision {
	s := stateOf(ctx)
	if s == nil || len(s.decisions) == 0 {
		return nil
	}
	ds := make([]Decision, len(s.decisions))
	for i, v := range s.decisions {
		ds[i] = v.decision
	}
	return ds
}
