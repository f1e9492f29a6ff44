package outbound

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/internal/ratefields"
	"github.com/ratelimit-go/ratelimit/internal/wait"
)

// This file is a request's whole path, in the order it runs.

// A Transport is an [http.RoundTripper] that keeps each upstream's rate
// limits, declared ([WithLimits]) and published: a request takes its cost
// from the budget of its upstream and partition ([WithPartition]) in the
// store, and waits until it fits, or is refused with an [*Error] (see
// docs/outbound.md). A Transport is safe for concurrent use, and all of
// them that share a store share the budgets.
type Transport struct {
	base      http.RoundTripper
	store     ratelimit.Store
	declared  map[string][]ratelimit.Limit // by upstream
	cost      func(*http.Request) int
	usage     func(*http.Response) int
	partition func(*http.Request) string
	maxWait   time.Duration
	noWait    bool
	maxDelay  time.Duration
	now       func() time.Time

	budgets budgets
	shared  *shared // nil when the store keeps nothing beside its counters
	stats   counters
}

// New returns a Transport that sends through base, or
// [http.DefaultTransport] when base is nil, and keeps the budgets in s.
// It refuses options that are wrong, naming them.
func New(base http.RoundTripper, s ratelimit.Store, opts ...Option) (*Transport, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: outbound.New: the store is nil", ratelimit.ErrInvalid)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, store: s, declared: map[string][]ratelimit.Limit{}, maxDelay: DefaultMaxRetryAfter, now: time.Now}
	for _, opt := range opts {
		if err := opt(t); err != nil {
			return nil, err
		}
	}
	if k, ok := s.(interface{ Overrides(string) override.Keeper }); ok {
		t.shared = &shared{k: k.Overrides(sharedNamespace)}
	}
	t.stats.ignored = map[string]int64{}
	t.budgets.init(t)
	return t, nil
}

// RoundTrip sends req once its budget has room for it: see [Transport].
// A request refused, or whose wait ran past its context's deadline or
// [WithMaxWait], gets an [*Error] and is not sent. While the store fails,
// requests are sent as if nothing were known; [Transport.Stats] counts it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := t.budgets.of(req)
	if err != nil {
		return nil, err
	}
	cost := 1
	if t.cost != nil {
		if cost = t.cost(req); cost < 1 {
			return nil, fmt.Errorf("%w: outbound: the cost of a request to %s is %d; want at least 1", ratelimit.ErrInvalid, b.upstream, cost)
		}
	}
	sets, d, err := t.admit(req.Context(), b, cost)
	var refused *Error
	switch {
	case err == nil:
	case errors.As(err, &refused):
		t.stats.refused.Add(1)
		fallthrough
	case errors.Is(err, ratelimit.ErrInvalid):
		if req.Body != nil {
			req.Body.Close() // not sent, as a RoundTripper must
		}
		return nil, err
	default:
		t.stats.storeErrors.Add(1) // send as if nothing were known
		sets = nil
	}
	t.stats.sent.Add(1)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.end(b, sets, d, 0)
		return nil, err
	}
	probe := 0 // the cost of a probe, which no limit of the upstream's counted
	if sets != nil && sets.probe {
		probe = cost
	}
	t.learn(req.Context(), b, resp, d, probe)
	usage := 0
	if t.usage != nil {
		usage = max(t.usage(resp), 0)
	}
	if sets != nil && d.Slot != "" {
		// The slot of a request in flight is held until its body is read or closed.
		resp.Body = &endingBody{ReadCloser: resp.Body, end: func() { t.end(b, sets, d, usage) }}
	} else {
		t.end(b, sets, d, usage)
	}
	return resp, nil
}

// admit takes cost from b, waiting for room unless told not to, and
// returns the sets it took it under. While another request probes an
// upstream b knows nothing of, it waits for the probe's answer even when
// told not to wait: a budget unknown is not a budget spent.
func (t *Transport) admit(ctx context.Context, b *budget, cost int) (*sets, ratelimit.Decision, error) {
	for {
		if err := t.crossBridge(ctx, b); err != nil {
			return nil, ratelimit.Decision{}, err
		}
		s, d, err := t.admitOnce(ctx, b, cost)
		if err != nil || b.bridge.Load() <= t.now().UnixNano() {
			return s, d, err
		}
		t.end(b, s, d, 0) // a response said the budget is spent meanwhile
	}
}

// crossBridge waits out b's bridge, or refuses a request that may not wait so long.
func (t *Transport) crossBridge(ctx context.Context, b *budget) error {
	for {
		held := time.Duration(b.bridge.Load() - t.now().UnixNano())
		if held <= 0 {
			return nil
		}
		d := ratelimit.MakeDecision(ratelimit.Result{Limit: holdLimit, RetryAfter: held})
		deadline, ok := ctx.Deadline()
		switch {
		case t.noWait:
			return newError(b.upstream, d, nil)
		case t.maxWait > 0 && held > t.maxWait, ok && t.now().Add(held).After(deadline):
			return newError(b.upstream, d, context.DeadlineExceeded)
		}
		if err := wait.For(ctx, min(held, probePoll)); err != nil {
			return newError(b.upstream, d, err)
		}
	}
}

// admitOnce is admit but for the bridge.
func (t *Transport) admitOnce(ctx context.Context, b *budget, cost int) (*sets, ratelimit.Decision, error) {
	for {
		s := b.sets.Load()
		if s.probe && t.fromShared(ctx, b) {
			continue // another process learned it
		}
		if !s.probe {
			d, err := t.take(ctx, b, cost, s.limits)
			return s, d, err
		}
		d, err := t.store.Allow(ctx, b.key, cost, s.limits)
		if err == nil && d.Allowed && b.sets.Load() != s {
			// The probe's answer came between the load and the store's
			// decision, and its slot was let go: this request is no
			// probe, but one to decide under what the answer taught.
			t.end(b, s, d, 0)
			continue
		}
		if err != nil || d.Allowed {
			return s, d, err
		}
		if !probing(d) {
			if t.noWait {
				return s, d, newError(b.upstream, d, nil)
			}
			d, err := t.take(ctx, b, cost, s.limits)
			return s, d, err
		}
		select {
		case <-b.learnt:
		case <-time.After(probePoll): // collected unstopped, since Go 1.23
		case <-ctx.Done():
			return s, d, newError(b.upstream, d, ctx.Err())
		}
	}
}

// probePoll is how often a request asks whether another process's probe has ended.
const probePoll = 20 * time.Millisecond

// probing reports whether d denied only for the probe.
func probing(d ratelimit.Decision) bool {
	for _, r := range d.Results() {
		if !r.Allowed && r.Limit.Name != probeLimit.Name {
			return false
		}
	}
	return d.Banned == 0
}

// take takes cost from b under limits, waiting for room unless told not to.
func (t *Transport) take(ctx context.Context, b *budget, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	if t.noWait {
		d, err := t.store.Allow(ctx, b.key, cost, limits)
		if err != nil || d.Allowed {
			return d, err
		}
		return d, newError(b.upstream, d, nil)
	}
	start := t.now()
	d, err := waitFor(ctx, t.store, b.key, cost, limits, t.maxWait)
	if !d.Allowed && d.Results() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return d, newError(b.upstream, d, err)
	}
	if err == nil && t.now().Sub(start) > time.Millisecond {
		t.stats.waited.Add(1)
	}
	return d, err
}

// end ends a request sent under s as d: it charges usage to the
// limits charged from usage and gives back d's slot, if any.
func (t *Transport) end(b *budget, s *sets, d ratelimit.Decision, usage int) {
	if s == nil || s.ending == nil || (d.Slot == "" && (usage == 0 || !b.usage)) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), endTimeout)
	defer cancel()
	if _, err := t.store.End(ctx, b.key, usage, s.ending, d); err != nil {
		t.stats.storeErrors.Add(1)
	}
}

// endTimeout bounds the store call that ends a request, which no
// caller's context bounds: it runs after the caller has its response.
const endTimeout = 5 * time.Second

// learn reads into b what resp, the answer to the request admitted as
// d, says of the upstream's limits (see budget.learn and catchUp), and
// holds b back when resp says its budget is spent.
func (t *Transport) learn(ctx context.Context, b *budget, resp *http.Response, d ratelimit.Decision, probe int) {
	var body []byte
	if (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && isProblem(resp.Header) {
		body = peekBody(resp, maxProblemBody)
	}
	info, problems := ratefields.Parse(resp.Header, resp.StatusCode, body, t.now(), t.maxDelay)
	for _, p := range problems {
		t.stats.ignore(p.Reason)
	}
	hold, why := time.Duration(0), ""
	if info.Limited {
		t.stats.limited.Add(1)
		hold, why = info.RetryAfter, "the upstream answered "+strconv.Itoa(resp.StatusCode)+" with Retry-After"
		if hold == 0 {
			hold, why = defaultHold, "the upstream answered "+strconv.Itoa(resp.StatusCode)+", saying not when to retry"
		}
	}
	for _, l := range info.Limits {
		if l.Remaining == 0 && l.Reset > hold {
			hold, why = l.Reset, "the upstream said nothing remains of its policy "+strconv.Quote(cmp.Or(l.Name, "upstream"))+" until its reset"
		}
	}
	if hold > t.maxDelay {
		// Only a hold is capped (a monthly quota spent), not a limit's reset with units left.
		t.stats.ignore(ratefields.ReasonCapped)
	}
	if hold > 0 {
		// Before b.learn: the requests waiting on a probe must wake to
		// the hold, not to room under the limits just learned.
		until := t.now().Add(min(hold, t.maxDelay)).UnixNano()
		b.bridge.Store(max(b.bridge.Load(), until))
		if err := t.hold(ctx, b, min(hold, t.maxDelay)); err != nil {
			t.stats.storeErrors.Add(1) // the bridge stays: the store may not hold
		} else {
			b.bridge.CompareAndSwap(until, 0)
		}
		b.mu.Lock()
		b.why = why
		b.mu.Unlock()
	}
	if changed, err := b.learn(ctx, t.store, info.Policies, info.Limits, probe); err != nil {
		t.stats.storeErrors.Add(1)
	} else if changed {
		t.toShared(ctx, b)
	}
	for _, l := range info.Limits {
		if l.Remaining != 0 && b.catchUp(ctx, t.store, l, d) != nil {
			t.stats.storeErrors.Add(1)
		}
	}
}

const (
	defaultHold    = time.Second // how long a 429 or 503 that says not when to retry holds its budget
	maxProblemBody = 64 << 10    // the most of a 429's or 503's body read for its problem details
)

// isProblem reports whether h announces RFC 9457 problem JSON.
func isProblem(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/problem+json"
}

// peekBody returns up to n bytes of resp's body, left whole for the caller to read.
func peekBody(resp *http.Response, n int64) []byte {
	head, err := io.ReadAll(io.LimitReader(resp.Body, n))
	resp.Body = &readCloser{Reader: io.MultiReader(bytes.NewReader(head), resp.Body), Closer: resp.Body}
	if err != nil {
		return nil
	}
	return head
}

type readCloser struct {
	io.Reader
	io.Closer
}

// An endingBody ends its request once, when it is read to its end or closed.
type endingBody struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

func (b *endingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.end)
	}
	return n, err
}

func (b *endingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}

// An Error is what RoundTrip returns for a request it did not send for
// want of room in its budget: at once, with [WithoutWaiting], or when the
// room would come after the request's deadline or [WithMaxWait].
type Error struct {
	// Upstream is the request's upstream: its URL's host.
	Upstream string

	// Policy is the name of a limit that had no room: a declared limit's
	// (see [WithLimits]), a policy the upstream published, or "hold" when
	// the upstream said its budget was spent.
	Policy string

	// RetryAfter is the time until the request would fit, if nothing else
	// is sent meanwhile.
	RetryAfter time.Duration

	// Err is why waiting ended: the context's error, or
	// context.DeadlineExceeded for WithMaxWait; nil without waiting.
	Err error
}

func newError(upstream string, d ratelimit.Decision, err error) *Error {
	e := &Error{Upstream: upstream, RetryAfter: d.RetryAfter, Err: err}
	results := d.Results()
	if i := slices.IndexFunc(results, func(r ratelimit.Result) bool { return !r.Allowed }); i >= 0 {
		e.Policy = results[i].Limit.Name
	}
	return e
}

func (e *Error) Error() string {
	return fmt.Sprintf("outbound: the budget of %s has no room for the request (%s): retry in %v", e.Upstream, e.Policy, forPeople(e.RetryAfter))
}

// forPeople rounds d up to what a person reads: whole milliseconds under
// a second, tenths of a second under a minute, whole seconds beyond, so
// that a wait of 56.999978s reads 57s and is never shorter than d.
func forPeople(d time.Duration) time.Duration {
	unit := time.Second
	switch {
	case d < time.Second:
		unit = time.Millisecond
	case d < time.Minute:
		unit = 100 * time.Millisecond
	}
	if r := d.Truncate(unit); r < d {
		return r + unit
	}
	return d
}

func (e *Error) Unwrap() error { return e.Err }

// Stats are what a Transport counted since it was made.
type Stats struct {
	Sent        int64            // requests sent
	Waited      int64            // requests sent after waiting for room
	Refused     int64            // requests not sent: RoundTrip returned an *Error
	Limited     int64            // responses that refused a request for a limit: 429, or 503 with Retry-After or a limit's problem
	StoreErrors int64            // store calls that failed; the requests were sent as if nothing were known
	Ignored     map[string]int64 // fields of responses ignored, or capped, by the reason (see docs/outbound.md)
}

// Stats returns what t counted.
func (t *Transport) Stats() Stats {
	c := &t.stats
	s := Stats{Sent: c.sent.Load(), Waited: c.waited.Load(), Refused: c.refused.Load(), Limited: c.limited.Load(), StoreErrors: c.storeErrors.Load()}
	c.mu.Lock()
	s.Ignored = maps.Clone(c.ignored)
	c.mu.Unlock()
	return s
}

type counters struct {
	sent, waited, refused, limited, storeErrors atomic.Int64
	mu                                          sync.Mutex
	ignored                                     map[string]int64 // by reason: a closed set
}

func (c *counters) ignore(reason ratefields.Reason) {
	c.mu.Lock()
	c.ignored[string(reason)]++
	c.mu.Unlock()
}

// lower returns s in lower case, without allocating when it is already.
func lower(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return 'A' <= r && r <= 'Z' }) < 0 {
		return s
	}
	return strings.ToLower(s)
}

// A Budget is what a Transport knows of the budget a request spends: see
// [Transport.Budget].
type Budget struct {
	// Upstream is the request's upstream: its URL's host.
	Upstream string

	// Limits are the budget's limits: those declared (WithLimits) and
	// those learned from the upstream's responses.
	Limits []ratelimit.Limit

	// Known reports whether a response of the upstream has come, or
	// limits were declared; until then, one request goes alone.
	Known bool

	// Held is how long the budget is held back yet, in every process
	// that shares the store: 0 when it is not.
	Held time.Duration

	// Why says what held it back, as this process saw it last: a 429 and
	// its Retry-After, or a policy with nothing remaining. "" when this
	// process saw none (another process may have).
	Why string
}

// Budget returns what t knows of the budget req would spend: its limits,
// and whether and why it is held back.
func (t *Transport) Budget(ctx context.Context, req *http.Request) (Budget, error) {
	b, err := t.budgets.of(req)
	if err != nil {
		return Budget{}, err
	}
	if b.sets.Load().probe {
		t.fromShared(ctx, b)
	}
	b.mu.Lock()
	v := Budget{Upstream: b.upstream, Limits: append(slices.Clone(b.declared), b.learned...), Known: b.known || len(b.declared) > 0, Why: b.why}
	b.mu.Unlock()
	p, err := t.store.Peek(ctx, b.key, 1, holdLimits)
	if err != nil {
		return v, err
	}
	if !p.Allowed {
		v.Held = p.RetryAfter
	} else {
		v.Why = ""
	}
	return v, nil
}

// Lift ends the hold of the budget req would spend, in every process that
// shares the store, for an operator who knows better than the upstream's
// Retry-After (a quota raised): its requests go again at once, as far as
// its limits allow, until the upstream says again that it is spent.
func (t *Transport) Lift(ctx context.Context, req *http.Request) error {
	b, err := t.budgets.of(req)
	if err != nil {
		return err
	}
	// The claim of the hold's end (see Transport.hold), so that a response
	// saying the same again holds again.
	p, err := t.store.Peek(ctx, b.key, 1, holdLimits)
	if err != nil {
		return err
	}
	if !p.Allowed {
		until := t.now().Add(p.RetryAfter).Unix()
		for s := until - 1; s <= until+1; s++ {
			if err := t.store.Reset(ctx, claimKey(b, s), claimLimits); err != nil {
				return err
			}
		}
	}
	if err := t.store.Reset(ctx, b.key, holdLimits); err != nil {
		return err
	}
	b.bridge.Store(0)
	b.mu.Lock()
	b.why = ""
	b.mu.Unlock()
	return nil
}
