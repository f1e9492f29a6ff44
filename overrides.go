package ratelimit

import (
	"context"
	"log/slog"
	"strings"
	"time"
	"unsafe"
)

// WithOverrides makes the Limiter decide under the overrides o holds: o
// is a Plane of the package admin, which keeps them in Redis, where
// every instance reads them (docs/overrides.md).
func WithOverrides(o Overrides) Option {
	return nonNil("WithOverrides: the overrides", o == nil, func(l *Limiter) { l.overrides = o })
}

// Overrides change a Limiter's limits for some keys while it runs; the
// package admin's Plane is the one to give [WithOverrides]. A Limiter
// calls these methods, safe for concurrent use; a user has no need to.
type Overrides interface {
	// Attach tells the overrides of limits l decides under, by route
	// ("" for WithLimits'), as Apply is given them, and of l's namespace,
	// store and observer (nil without). New calls it with the limits of
	// WithLimits and WithRoutes; l calls it again with each set
	// WithLimitsFunc returns, under its route, when it first meets it.
	Attach(l *Limiter, namespace string, st Store, observe func(Request, Event), limits map[string][]Limit)

	// Apply returns the limits in force for key (as the store is given
	// it, after the namespace and route) in place of limits, and ok, when
	// an override applies: none when every limit is unlimited for key;
	// the blocked ones alone, which deny without the store, when blocked.
	// For the same limits under the same overrides it returns the same
	// slice, which neither side changes.
	Apply(limits []Limit, key string) (inForce []Limit, blocked, ok bool)

	// Denied is told of each limit that denied a request of key, or
	// would have were it not Shadow, and for how long yet the key is
	// banned. It must be quick.
	Denied(limit, key string, shadow bool, banned time.Duration)
}

// attachOverrides tells the Limiter's overrides of its limits.
func (l *Limiter) attachOverrides() {
	limits := make(map[string][]Limit)
	if l.all != nil {
		limits[""] = l.all.set.limits
	}
	if l.routes != nil {
		for _, rt := range l.routes.entries {
			limits[rt.pattern] = rt.policy.set.limits
		}
	}
	l.overrides.Attach(l, l.namespace, l.store, l.observe, limits)
}

// overriddenKey names a policy under the limits in force for some keys,
// as Overrides.Apply gives them.
type overriddenKey struct {
	p       *policy
	inForce *Limit // the first of them
	n       int
	blocked bool
}

// overriddenMemo is a policy in force under overrides, kept by the
// policy it overrides, among the last few made of it, so that most
// requests find it without a map.
type overriddenMemo struct {
	k overriddenKey
	c checkedSet
}

// The policies in force under overrides, at most maxOverridden kept.
const maxOverridden = 4096

// makeOverridden returns the policy of k's limits.
func (l *Limiter) makeOverridden(k overriddenKey) (c checkedSet) {
	b := l.base
	b.shadow = false // the limits say which are
	c.p, c.problem = b.newPolicy("", unsafe.Slice(k.inForce, k.n))
	if c.problem != "" {
		return c
	}
	q := c.p
	q.prefix = k.p.prefix
	if q.enforced != nil {
		q.enforced.prefix = k.p.prefix
	}
	if k.blocked { // never shadow: no enforced part
		q.blocked = true
		for i, lim := range q.set.limits {
			q.capacity[i] = []string{"0"}
			q.items[i] = policyItem(q.names[i], lim, 0, b.unit)
		}
		q.policyValue = []string{strings.Join(q.items, ", ")}
	}
	return c
}

// overridden returns the policy in force for key (the store's, under p)
// under the Limiter's overrides: p when none applies, nil when every
// limit is unlimited; a blocking one is marked blocked.
func (l *Limiter) overridden(ctx context.Context, p *policy, key string) *policy {
	inForce, blocked, ok := l.overrides.Apply(p.set.limits, key[len(p.prefix):])
	switch {
	case !ok:
		return p
	case len(inForce) == 0:
		return nil
	}
	k := overriddenKey{p, &inForce[0], len(inForce), blocked}
	var c checkedSet
	found := false
	for i := range p.overridden {
		if m := p.overridden[i].Load(); m != nil && m.k == k {
			c, found = m.c, true
			break
		}
	}
	if !found {
		c = l.overriddenSets.Get(k)
		next := p.nextOverridden.Add(1) % uint32(len(p.overridden))
		p.overridden[next].Store(&overriddenMemo{k, c})
	}
	if c.problem != "" {
		// An override checked against another Limiter's limits, or against
		// none (WithLimitsFunc's): the limits stay as they are.
		if ok, dropped := l.logs.allow(logOverride); ok {
			l.logger.LogAttrs(ctx, slog.LevelWarn, "ratelimit: an override does not apply to these limits, which stay",
				slog.String("problem", c.problem), slog.Int64("suppressed", dropped))
		}
		return p
	}
	return c.p
}

// blockedDecision is the denial of a blocked policy: nothing left, and
// a retry after the limits' windows, or a day for a calendar's.
func blockedDecision(p *policy) Decision {
	rs := make([]Result, len(p.set.limits))
	for i, lim := range p.set.limits {
		w := policyWindow(lim)
		if lim.Algorithm.calendar() {
			w = 24 * time.Hour
		}
		w = max(w, time.Second)
		rs[i] = Result{Limit: lim, Window: w, ResetAfter: w, RetryAfter: w}
	}
	return MakeDecision(rs...)
}

// tellDenied tells the Limiter's overrides, if any, of each limit that
// denied d, a decision for key under p, or would have denied it when
// shadow.
func (l *Limiter) tellDenied(p *policy, key string, d *Decision, shadow bool) {
	if l.overrides == nil {
		return
	}
	client := key[len(p.prefix):]
	for _, res := range d.results() {
		if !res.Allowed {
			l.overrides.Denied(res.Limit.Name, client, shadow, d.Banned)
		}
	}
}
