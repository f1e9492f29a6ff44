package ratelimit

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// WithOverrides makes the Limiter apply the overrides o holds, and tell
// o which keys its limits deny: o is a Plane of the package admin, which
// keeps them in Redis, where every instance reads them. For each limit
// of a request, the override of its policy that matches the request's
// key applies, in the same store call as the limits it keeps. A blocked
// key is denied without asking the store; an unlimited one is not
// counted against that limit. docs/overrides.md tells what a change of
// quota or window keeps of the counts.
func WithOverrides(o override.Source) Option {
	return nonNil("WithOverrides: the overrides", o == nil, func(l *Limiter) { l.overrides = o })
}

// overrideKey names a policy under the effects of its overrides (the
// zero Override for none).
type overrideKey struct {
	p       *policy
	effects [maxSetLimits]override.Override
}

// The policies in force under overrides, made once for each distinct
// set of effects on a policy, at most maxOverridden of each kind; a
// policy of one limit, the common case, is kept by a small key.
const maxOverridden = 4096

type overriddenPolicies struct {
	one  bounded.Map[oneKey, checkedSet]
	many bounded.Map[overrideKey, checkedSet]

	// byEffect holds, for the table in force, the policy in force under
	// each of its effects for the policy that met it last: most requests
	// find it without a lock or a map.
	byEffect atomic.Pointer[effectMemo]
}

// init makes m's maps make what l's policies are under overrides.
func (m *overriddenPolicies) init(l *Limiter) {
	m.one = bounded.Map[oneKey, checkedSet]{Max: maxOverridden, Make: func(k oneKey) (c checkedSet) {
		var effects [maxSetLimits]override.Override
		effects[0] = k.e
		c.p, c.problem = l.base.applyOverrides(k.p, &effects)
		return c
	}}
	m.many = bounded.Map[overrideKey, checkedSet]{Max: maxOverridden, Make: func(k overrideKey) (c checkedSet) {
		c.p, c.problem = l.base.applyOverrides(k.p, &k.effects)
		return c
	}}
}

type effectMemo struct {
	table *override.Table
	cells []atomic.Pointer[memoCell]
}

type memoCell struct {
	p *policy
	c checkedSet
}

// oneKey names a policy of one limit under the effect of its override.
type oneKey struct {
	p *policy
	e override.Override
}

// overridden returns the policy in force for key (the store's, under p)
// under the Limiter's overrides: p when none applies, nil when every
// limit is unlimited; a blocking one is marked blocked.
func (l *Limiter) overridden(ctx context.Context, p *policy, key string) *policy {
	t := l.overrides.Table()
	if t.Len() == 0 {
		return p
	}
	client := key[len(p.prefix):]
	m := &l.overriddenMemo
	var c checkedSet
	if len(p.set.limits) == 1 {
		i, e := t.Find(p.set.limits[0].Name, client)
		if e == nil {
			return p
		}
		memo := m.byEffect.Load()
		if memo == nil || memo.table != t {
			memo = &effectMemo{table: t, cells: make([]atomic.Pointer[memoCell], t.Effects())}
			m.byEffect.Store(memo)
		}
		if cell := memo.cells[i].Load(); cell != nil && cell.p == p {
			c = cell.c
		} else {
			c = m.one.Get(oneKey{p, *e})
			memo.cells[i].Store(&memoCell{p, c})
		}
	} else {
		var k overrideKey
		found := false
		for i := range p.set.limits {
			if o, ok := t.Lookup(p.set.limits[i].Name, client); ok {
				k.effects[i] = o.Effect()
				found = true
			}
		}
		if !found {
			return p
		}
		k.p = p
		c = m.many.Get(k)
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

// applyOverrides returns p under effects: its limits with their quotas
// and windows replaced, the unlimited ones left out (nil when that is
// every one), or, when any is blocked, a policy of the blocked ones
// alone, which denies. Or it says why the limits cannot be so.
func (b policyBase) applyOverrides(p *policy, effects *[maxSetLimits]override.Override) (*policy, string) {
	b.shadow = false // the limits say which are
	var kept, blocked []Limit
	for i, lim := range p.set.limits {
		e := effects[i]
		switch {
		case e.Policy == "":
			kept = append(kept, lim)
		case e.Unlimited:
		case e.Blocked:
			lim.Shadow = false // a block is always enforced
			blocked = append(blocked, lim)
		default:
			kept = append(kept, withOverride(lim, e))
		}
	}
	if len(blocked) > 0 {
		q, problem := b.newPolicy("", blocked)
		if problem != "" {
			return nil, problem
		}
		q.prefix, q.blocked = p.prefix, true // never shadow: no enforced part
		for i, lim := range q.set.limits {
			q.capacity[i] = []string{"0"}
			q.items[i] = policyItemOf(q.names[i], lim, b.unit, 0)
		}
		q.policyValue = []string{strings.Join(q.items, ", ")}
		return q, ""
	}
	if len(kept) == 0 {
		return nil, ""
	}
	q, problem := b.newPolicy("", kept)
	if problem != "" {
		return nil, problem
	}
	q.prefix = p.prefix
	if q.enforced != nil {
		q.enforced.prefix = p.prefix
	}
	return q, ""
}

// withOverride returns lim with o's quota, window and shadow. A token
// bucket's Burst, when set, scales with its quota.
func withOverride(lim Limit, o override.Override) Limit {
	quota := cmp.Or(o.Quota, lim.Quota)
	if lim.Algorithm == TokenBucket && lim.Burst != 0 && quota != lim.Quota {
		burst := math.Round(float64(lim.Burst) * float64(quota) / float64(lim.Quota))
		lim.Burst = int(min(max(burst, 1), wire.MaxQuota))
	}
	lim.Quota, lim.Window = quota, cmp.Or(o.Window, lim.Window)
	lim.Shadow = o.Shadow || lim.Shadow && !o.Enforced
	return lim
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

// checkOverride reports whether the Limiter has a limit of o's policy,
// and what is wrong with o for such a limit, as NewLimits would say.
func (l *Limiter) checkOverride(o override.Override) (known bool, err error) {
	if err := o.Check(); err != nil {
		return false, err
	}
	var policies []*policy
	if l.all != nil {
		policies = append(policies, l.all)
	}
	if l.routes != nil {
		for _, rt := range l.routes.entries {
			policies = append(policies, rt.policy)
		}
	}
	l.sets.Range(func(_ setKey, c checkedSet) bool {
		if c.p != nil {
			policies = append(policies, c.p)
		}
		return true
	})
	for _, p := range policies {
		for i, lim := range p.set.limits {
			if lim.Name != o.Policy {
				continue
			}
			known = true
			if o.Unlimited || o.Blocked {
				continue // any limit can be
			}
			switch {
			case o.Window != 0 && (lim.Algorithm.calendar() || lim.Algorithm == Concurrent):
				return true, fmt.Errorf("%w: Window: %q is a %s limit, whose window is not a quota's", override.ErrInvalid, o.Policy, lim.Algorithm)
			}
			var e [maxSetLimits]override.Override
			e[i] = o.Effect()
			if _, problem := l.base.applyOverrides(p, &e); problem != "" {
				return true, fmt.Errorf("%w: %s: the limit %q would be invalid: %s", override.ErrInvalid, overriddenFields(o), o.Policy, problem)
			}
		}
	}
	// Of WithLimitsFunc's sets, made per request, only those it returned
	// so far are known; an override wrong for a later one is ignored
	// there (and logged).
	return known, nil
}

// policyItemOf is policyItem with the quota q in place of the limit's.
func policyItemOf(name string, l Limit, unit string, q int) string {
	item := policyItem(name, l, unit)
	full := ";q=" + strconv.FormatInt(sfInt(int64(l.capacity())), 10)
	return name + ";q=" + strconv.Itoa(q) + item[len(name)+len(full):]
}

// overriddenFields names the fields of o that change a limit's numbers.
func overriddenFields(o override.Override) string {
	switch {
	case o.Quota != 0 && o.Window != 0:
		return "Quota and Window"
	case o.Window != 0:
		return "Window"
	}
	return "Quota"
}

// tellDenied tells the Limiter's overrides, if any, of each policy that
// denied d, a decision for key under p, or would have denied it when
// shadow.
func (l *Limiter) tellDenied(p *policy, key string, d *Decision, shadow bool) {
	if l.overrides == nil {
		return
	}
	client := key[len(p.prefix):]
	for _, res := range d.results() {
		if !res.Allowed {
			l.overrides.Denied(override.Denial{Policy: res.Limit.Name, Key: client, Shadow: shadow, Banned: d.Banned})
		}
	}
}

// limiterView is the Limiter as its overrides see it (override.Limiter).
type limiterView struct{ l *Limiter }

func (o limiterView) Namespace() string                       { return o.l.namespace }
func (o limiterView) Check(v override.Override) (bool, error) { return o.l.checkOverride(v) }
func (o limiterView) Store() Store                            { return o.l.store }

func (o limiterView) Audit(r *http.Request, who, what, before, after string) {
	if o.l.observe != nil {
		o.l.observe(r, Event{Namespace: o.l.namespace, Outcome: outcomeChanged, Who: who, What: what, Before: before, After: after})
	}
}

// maxListed bounds the limits Policies lists of WithLimitsFunc's sets.
const maxListed = 256

// Policies returns the limits of WithLimits and WithRoutes, and those
// of the sets WithLimitsFunc returned so far, each once, by route.
func (o limiterView) Policies() []override.Policy {
	l := o.l
	var list []override.Policy
	add := func(route string, p *policy, perRequest bool) {
		for _, lim := range p.set.limits {
			c := override.Policy{Name: lim.Name, Route: route, Algorithm: lim.Algorithm.String(),
				Quota: lim.Quota, Window: lim.Window, Shadow: lim.Shadow, PerRequest: perRequest}
			if !slices.Contains(list, c) {
				list = append(list, c)
			}
		}
	}
	if l.all != nil {
		add("", l.all, false)
	}
	if l.routes != nil {
		for _, rt := range l.routes.entries {
			add(rt.pattern, rt.policy, false)
		}
	}
	l.sets.Range(func(k setKey, c checkedSet) bool {
		if c.p != nil && len(list) < maxListed {
			add(k.pattern, c.p, true)
		}
		return true
	})
	slices.SortStableFunc(list, func(a, b override.Policy) int { return cmp.Compare(a.Route, b.Route) })
	return list
}
