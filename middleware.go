package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/finish"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// This file is the top of the request's path, in the order it runs:
// Handler, Allow (the limits that apply, the key, the overrides in
// force, the store, the headers, the answer), Finish, End, then Peek and
// Reset, and the state a request carries. It calls down, and nothing
// there calls back: routes.go finds the route's limits, keyfunc.go makes
// the store's key, overrides.go applies the operators' overrides, the
// Store decides, and response.go writes the headers and the 429 or error
// answers from the part of the request's state it owns (responseState).

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
	costFunc  func(*http.Request) int
	skip      func(*http.Request) bool
	deny      func(http.ResponseWriter, *http.Request, Decision)
	onError   func(http.ResponseWriter, *http.Request, error) bool
	headers   Headers
	partition *partitionKeys                // of Headers.PartitionKey; nil: no pk
	report    func(*http.Request, Decision) // of WithDryRun; nil: log
	observe   func(*http.Request, Event)    // of WithObserver; nil without
	logger    *slog.Logger
	logs      logThrottle
	countOnly func(status int) bool // of WithCountOnly; nil: count every request
	base      policyBase            // what every policy takes from the options (WithBan's ban)

	all    *policy     // the limits of WithLimits; nil without
	routes *routeTable // the table of WithRoutes; nil without

	limitsFunc func(*http.Request) []Limit // of WithLimitsFunc; nil without
	setsMu     sync.RWMutex
	sets       map[setKey]checkedSet // the sets limitsFunc returned, checked

	overrides      override.Hooks // of WithOverrides; zero without
	overriddenMemo overriddenPolicies

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
		defer l.End(r) // however the handler returns: a panic too
		if l.countOnly == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &finish.Writer{ResponseWriter: w, Finisher: finish.Finisher{Limiter: l, Request: r}}
		next.ServeHTTP(sw, r)
		sw.Finish(http.StatusOK) // a handler that wrote nothing answers 200
	})
}

// Allow decides r. When r may pass, it sets the rate-limit headers on w
// and returns true with the request to serve: r, or a copy of r whose
// context carries the decision (see [Decisions]) and whose Pattern is the
// route pattern the Limiter's table matched, when r had none. The caller
// then serves that request (and, with [WithCountOnly], calls
// [Limiter.Finish] with it and the status as the response's header is
// about to be written). Otherwise Allow has answered r
// on w (429, or the error handler's answer) and returns false. It is the
// one decision function behind the net/http, Gin and Echo middleware.
func (l *Limiter) Allow(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if l.skip != nil && l.skip(r) {
		return r, true
	}
	p, pattern := l.routePolicy(r)
	if p == nil && l.limitsFunc == nil {
		return r, true // no limits apply: no decision to carry
	}
	r, s := withState(r, pattern)
	p, err := l.funcPolicy(r, p, pattern)
	if err != nil {
		return r, l.fail(w, r, err, Event{Route: pattern})
	}
	if p == nil {
		return r, true
	}
	key, err := storeKey(r, l.keyFunc, p.prefix, &s.buf)
	if err != nil {
		return r, l.fail(w, r, err, Event{Route: pattern})
	}
	if l.overrides.Table != nil {
		if p = l.overridden(r.Context(), p, key); p == nil {
			return r, true // unlimited
		}
	}
	cost := l.costOf(r)
	var start time.Time
	if l.observe != nil {
		start = time.Now()
	}
	var d Decision
	var shadowed *Decision // the denial of Shadow limits alone, when they deny
	p, shadowed, err = l.decide(r.Context(), p, key, cost, &d)
	wouldDeny := shadowed != nil && (d.Allowed || p.shadows)
	var latency time.Duration
	if l.observe != nil {
		latency = time.Since(start)
	}
	if err != nil {
		s.undecided = p // for FailClosed's violated-policies
		return r, l.fail(w, r, err, Event{Route: pattern, Cost: cost, Latency: latency})
	}
	s.decisions = append(s.decisions, limiterDecision{policy: p, decision: d, pk: l.partition.of(key)})
	s.endings = append(s.endings, ending{limiter: l, pattern: pattern, key: key, cost: cost})
	var retry int64 // the Retry-After of a 429, which caps the t of each limit that denied
	if !d.Allowed && !wouldDeny {
		retry = retryAfterSeconds(d)
	}
	s.responseHeader = w.Header()
	setHeaders(s.responseHeader, l.headers, &s.responseState, retry)
	if l.observe != nil {
		e := Event{Namespace: l.namespace, Route: pattern, Outcome: outcomeOf(&d, wouldDeny), Cost: cost, Latency: latency, Decision: d}
		if wouldDeny {
			e.Decision = *shadowed
		}
		l.observe(r, e)
	}
	if wouldDeny {
		l.tellDenied(p, key, shadowed)
		l.wouldDeny(w, r, *shadowed)
		return r, true
	}
	if d.Allowed {
		return r, true
	}
	l.tellDenied(p, key, &d)
	setRetryAfter(w, &s.responseState, retry)
	l.deny(w, r, d)
	return r, false
}

// decide sets d to the store's decision on a request of key at cost
// under p, or to the denial of p when an override blocks it, without the
// store. When Shadow limits alone deny the request, it returns that
// denial, and, beside limits that are not Shadow, sets d to their own
// decision: the policy returned is then theirs. d is the caller's, so
// that the common decision is not copied on the way.
func (l *Limiter) decide(ctx context.Context, p *policy, key string, cost int, d *Decision) (*policy, *Decision, error) {
	if p.blocked {
		*d = blockedDecision(p)
		return p, nil, nil
	}
	var err error
	*d, err = l.store.Allow(ctx, key, cost, p.set)
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

// routePolicy returns the policy of r's route and the route table's
// pattern that matched (see routeTable.match), or those of WithLimits (nil
// without) and "".
func (l *Limiter) routePolicy(r *http.Request) (*policy, string) {
	if rt, ok := l.routes.match(r); ok {
		return rt.policy, rt.pattern
	}
	return l.all, ""
}

// funcPolicy returns the policy of the limits WithLimitsFunc gives r
// under the route pattern, or, when it gives none or is not set, p. Each
// distinct set is checked once and kept, up to maxSets of them.
func (l *Limiter) funcPolicy(r *http.Request, p *policy, pattern string) (*policy, error) {
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
	l.setsMu.RLock()
	c, ok := l.sets[k]
	l.setsMu.RUnlock()
	if !ok {
		c.p, c.problem = l.base.newPolicy(pattern, limits)
		l.setsMu.Lock()
		if l.sets == nil || len(l.sets) >= maxSets {
			l.sets = make(map[setKey]checkedSet) // full: start afresh
		}
		l.sets[k] = c
		l.setsMu.Unlock()
	}
	if c.problem != "" {
		return nil, fmt.Errorf("%w: WithLimitsFunc returned invalid limits: %s", ErrInvalid, c.problem)
	}
	return c.p, nil
}

// The sets of WithLimitsFunc: at most maxSetLimits limits each, and at
// most maxSets kept; past that the memo starts afresh.
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

// costOf returns r's cost: 1, or what WithCost's function says.
func (l *Limiter) costOf(r *http.Request) int {
	if l.costFunc == nil {
		return 1
	}
	return l.costFunc(r)
}

// fail logs err, tells the observer (e holds what is known of the
// request: its route, and its cost and the store's latency once asked)
// and hands r to the error handler. A request whose context ended before
// the store decided is no store failure: it is not logged.
func (l *Limiter) fail(w http.ResponseWriter, r *http.Request, err error, e Event) bool {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		l.observeFailure(r, outcomeCanceled, err, e)
		return l.onError(w, r, err)
	}
	kind, msg, level := logStoreError, "ratelimit: store failed", slog.LevelError
	if errors.Is(err, ErrInvalid) {
		kind, msg, level = logRequestError, "ratelimit: request not decided", slog.LevelWarn
		l.observeFailure(r, outcomeBadRequest, err, e)
	} else {
		l.observeFailure(r, outcomeStoreError, err, e)
	}
	if ok, dropped := l.logs.allow(kind); ok {
		l.logger.LogAttrs(r.Context(), level, msg, slog.String("error", err.Error()),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int64("suppressed", dropped))
	}
	return l.onError(w, r, err)
}

// observeFailure tells the observer, if any, that r was not decided.
func (l *Limiter) observeFailure(r *http.Request, outcome string, err error, e Event) {
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
	if p.enforced == nil {
		return true
	}
	for _, res := range d.results() {
		if !res.Allowed && !res.Limit.Shadow {
			return false
		}
	}
	return d.Banned == 0
}

// wouldDeny reports a request that Shadow limits alone would have
// denied (d says which), and that is served: to WithDryRun's report, or
// to the log; and, with Headers.Shadow, in the response's header.
func (l *Limiter) wouldDeny(w http.ResponseWriter, r *http.Request, d Decision) {
	if l.headers.Shadow {
		var names []string
		for _, res := range d.results() {
			if !res.Allowed {
				names = append(names, quoteString(res.Limit.Name))
			}
		}
		w.Header()[wire.FieldShadow] = []string{strings.Join(names, ", ")}
	}
	if l.report != nil {
		l.report(r, d)
		return
	}
	if ok, dropped := l.logs.allow(logDryRun); ok {
		l.logger.LogAttrs(r.Context(), slog.LevelInfo, "ratelimit: a shadow limit would deny",
			slog.String("limit", deniedBy(d).Limit.String()), slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Duration("retry_after", d.RetryAfter), slog.Int64("suppressed", dropped))
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

// Finish reports the status of r's response to a Limiter built with
// [WithCountOnly], which decides by it whether r's usage is its cost or
// nothing; otherwise it does nothing, as it does when called again for r.
// Call it as the response's header is about to be written:
// [Limiter.Handler] does, and so do the Gin and Echo adapters. Then the
// RateLimit and X-RateLimit headers Allow set are written anew, so that a
// counted response says what remains after it. The usage is charged when
// r ends (see [Limiter.End]). It returns no error: it asks no store.
func (l *Limiter) Finish(r *http.Request, status int) error {
	if l.countOnly == nil {
		return nil
	}
	s := stateOf(r.Context())
	e, d := s.decidedBy(l)
	if e == nil || e.finished || !e.ends(d) {
		return nil
	}
	e.finished, e.counts = true, l.countOnly(status)
	s.expect(e, d)
	return nil
}

// End ends r for the Limiter, once its handler has returned, however it
// returned: a deferred call runs on a panic, a client gone away, a
// hijacked connection. When the Limiter admitted r under a [Concurrent]
// limit, or under limits charged from usage (see [Limit].Usage, and
// [WithCountOnly]), it gives back r's slot and charges r's usage in one
// store call (see [Store].End): what the handler reported with [Charge],
// else r's cost; with WithCountOnly, that or nothing, as Finish was told.
// Otherwise it does nothing, as it does when called again.
// [Limiter.Handler] calls it, and so do the Gin and Echo adapters.
//
// The store is asked even when r's context has ended: a client that went
// away still used what it used. A failure is logged and returned: the
// response is done, so no error handler runs.
func (l *Limiter) End(r *http.Request) error {
	e, d := stateOf(r.Context()).decidedBy(l)
	if e == nil || e.ended || !e.ends(d) {
		return nil
	}
	e.ended = true
	usage, slot := 0, e.stored(d).Slot
	if d.policy.usage {
		usage = e.used()
	}
	if usage == 0 && slot == "" {
		return nil // nothing to charge or give back
	}
	var start time.Time
	if l.observe != nil {
		start = time.Now()
	}
	charged, err := l.store.End(context.WithoutCancel(r.Context()), e.key, usage, d.policy.set, *e.stored(d))
	var latency time.Duration
	if l.observe != nil {
		latency = time.Since(start)
	}
	if err != nil {
		if ok, dropped := l.logs.allow(logStoreError); ok {
			l.logger.LogAttrs(r.Context(), slog.LevelError, "ratelimit: store failed charging a response", slog.String("error", err.Error()),
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("usage", usage), slog.Int64("suppressed", dropped))
		}
		l.observeFailure(r, outcomeStoreError, err, Event{Route: e.pattern, Cost: usage, Latency: latency})
		return fmt.Errorf("ratelimit: charging the response: %w", err)
	}
	if l.observe != nil && usage > 0 {
		l.observe(r, Event{Namespace: l.namespace, Route: e.pattern, Outcome: outcomeCharged, Cost: usage, Latency: latency, Decision: charged})
	}
	return nil
}

// Charge adds units to the usage of the request whose context is ctx, for
// each Limiter that admitted it under limits charged from usage (see
// [Limit].Usage): tokens generated, bytes sent, query points. Once the
// handler has returned, the Limiter charges the usage (see
// [Limiter.End]). Until the handler calls Charge, a request's usage is
// its cost (1, or what [WithCost] says); after, the sum of what it
// reported, 0 included. A negative number counts as 0.
//
// If the response's header is not written yet, its RateLimit and
// X-RateLimit fields are written anew at once to say what remains after
// the usage reported so far, so a handler that knows its usage before it
// writes tells the client the truth; a streamed response, whose header
// is gone, leaves it to the next response. Call Charge where the handler
// may set the response's header: from its goroutine, or with the same
// care. It does nothing for a request no such Limiter admitted.
func Charge(ctx context.Context, units int) {
	s := stateOf(ctx)
	if s == nil {
		return
	}
	units = max(units, 0)
	for i := range s.endings {
		e, d := &s.endings[i], &s.decisions[i]
		if e.ended || !e.ends(d) || !d.policy.usage {
			continue
		}
		if !e.reported {
			e.reported, e.usage = true, 0
		}
		e.usage = min(e.usage+units, wire.MaxQuota) // a count a script keeps exact
		s.expect(e, d)
	}
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
	var b strings.Builder
	key, err := storeKey(r, l.keyFunc, p.prefix, &b)
	if err != nil {
		return Decision{}, err
	}
	if l.overrides.Table != nil {
		if p = l.overridden(r.Context(), p, key); p == nil {
			return Decision{}, nil // unlimited
		} else if p.blocked {
			return blockedDecision(p), nil
		}
	}
	return l.store.Peek(r.Context(), key, l.costOf(r), p.set)
}

// Reset forgets the counters of r's key under the limits that apply to r,
// for example after a successful login.
func (l *Limiter) Reset(r *http.Request) error {
	p, err := l.policyFor(r)
	if p == nil || err != nil {
		return err
	}
	var b strings.Builder
	key, err := storeKey(r, l.keyFunc, p.prefix, &b)
	if err != nil {
		return err
	}
	if l.overrides.Table != nil {
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
func (l *Limiter) policyFor(r *http.Request) (*policy, error) {
	p, pattern := l.routePolicy(r)
	return l.funcPolicy(r, p, pattern)
}

// requestState is what the Limiters that see a request keep in its
// context: what its response is written from (see responseState) and,
// for each decision there, at the same index, what ends the request
// for its Limiter. It is the request's context itself, and holds the copy
// of the request that carries it, so that both cost one allocation; the
// keys and header values its Limiters make share a second one, the
// buffer's. The first Limiter puts it there, and the others add to it,
// before the handler runs.
type requestState struct {
	context.Context
	responseState
	endings []ending     // endings[i] is of decisions[i]
	one     [1]ending    // endings' first array: one Limiter's; a second moves it
	req     http.Request // the copy of the request that carries the state
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
}

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
// usage so far is charged: each limit charged from usage has that much
// less left. Then, while the header is not sent, the rate-limit fields
// say so.
func (s *requestState) expect(e *ending, d *limiterDecision) {
	if e.admitted == nil {
		stored := d.decision
		e.admitted = &stored
	}
	used := e.used()
	var buf [4]Result
	rs := buf[:0]
	for _, r := range e.admitted.results() {
		if r.Limit.Usage && used > 0 {
			r.Remaining = max(r.Remaining-used, 0)
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
	return s.Context.Value(key)
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
// when it has none. When r has no Pattern and the Limiter's table
// matched pattern, the request returned has it.
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
	s := &requestState{Context: r.Context()}
	s.decisions = s.responseState.one[:0]
	s.endings = s.one[:0]
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
// the client what it has left:
//
//	for _, d := range ratelimit.Decisions(r.Context()) {
//		for _, res := range d.Results() {
//			fmt.Fprintf(w, "%s: %d left\n", res.Limit, res.Remaining)
//		}
//	}
//
// A dry-run Limiter's decision is there even when it would have denied; a
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
