package admin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
)

// Attach is how a Limiter given the Plane (see ratelimit.WithOverrides)
// tells it of itself and of the limits it decides under: Set checks
// overrides against them, the handler lists them and tells the
// Limiter's observer of changes.
func (p *Plane) Attach(l *ratelimit.Limiter, namespace string, st ratelimit.Store, observe func(ratelimit.Request, ratelimit.Event), limits map[string][]ratelimit.Limit) {
	p.limitersMu.Lock()
	i := slices.IndexFunc(p.limiters, func(a *attached) bool { return a.l == l })
	known := i >= 0
	if !known {
		p.limiters = append(p.limiters, &attached{l: l, namespace: namespace, store: st, observe: observe})
		i = len(p.limiters) - 1
	}
	a := p.limiters[i]
	p.limitersMu.Unlock()
	a.add(limits, known)
}

// Apply returns the limits in force for key in place of limits under the
// overrides read last: a Limiter given the Plane decides under them.
func (p *Plane) Apply(limits []ratelimit.Limit, key string) ([]ratelimit.Limit, bool, bool) {
	return p.table.Load().Apply(limits, key)
}

func (p *Plane) attached() []*attached {
	p.limitersMu.Lock()
	defer p.limitersMu.Unlock()
	return slices.Clone(p.limiters)
}

// attached is a Limiter given the Plane, as it told of itself.
type attached struct {
	l         *ratelimit.Limiter
	namespace string
	store     ratelimit.Store
	observe   func(ratelimit.Request, ratelimit.Event)

	mu   sync.Mutex
	sets []limitSet // at most maxSets
}

type limitSet struct {
	route      string
	limits     []ratelimit.Limit
	perRequest bool // of WithLimitsFunc
}

// maxSets bounds the sets of WithLimitsFunc kept of a Limiter.
const maxSets = 256

// add keeps limits, of WithLimitsFunc when perRequest.
func (a *attached) add(limits map[string][]ratelimit.Limit, perRequest bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for route, set := range limits {
		s := limitSet{route, set, perRequest}
		// A Limiter that forgot its sets (past its bound) tells them anew.
		known := slices.ContainsFunc(a.sets, func(k limitSet) bool {
			return k.route == s.route && k.perRequest == s.perRequest && slices.Equal(k.limits, s.limits)
		})
		if !known && len(a.sets) < maxSets {
			a.sets = append(a.sets, s)
		}
	}
	slices.SortStableFunc(a.sets, func(x, y limitSet) int { return cmp.Compare(x.route, y.route) })
}

func (a *attached) limitSets() []limitSet {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sets)
}

// Policies returns the Limiter's limits, each once, by route.
func (a *attached) Policies() []override.Policy {
	var list []override.Policy
	for _, s := range a.limitSets() {
		for _, lim := range s.limits {
			c := override.Policy{Name: lim.Name, Route: s.route, Algorithm: lim.Algorithm.String(),
				Quota: lim.Quota, Window: lim.Window, Shadow: lim.Shadow, PerRequest: s.perRequest}
			if !slices.Contains(list, c) {
				list = append(list, c)
			}
		}
	}
	return list
}

// Check reports whether the Limiter has a limit of o's policy, and what
// is wrong with o for such a limit, as ratelimit.NewLimits would say. Of
// WithLimitsFunc's sets, only those it returned so far are known; an
// override wrong for a later one is ignored there (and logged).
func (a *attached) Check(o Override) (known bool, err error) {
	if err := o.Check(); err != nil {
		return false, err
	}
	for _, s := range a.limitSets() {
		for i, lim := range s.limits {
			if lim.Name != o.Policy {
				continue
			}
			known = true
			if o.Unlimited || o.Blocked {
				continue // any limit can be
			}
			ownWindow := []ratelimit.Algorithm{ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly, ratelimit.Concurrent}
			if o.Window != 0 && slices.Contains(ownWindow, lim.Algorithm) {
				return true, fmt.Errorf("%w: Window: %q is a %s limit, whose window is not a quota's", override.ErrInvalid, o.Policy, lim.Algorithm)
			}
			set := slices.Clone(s.limits)
			set[i] = o.On(lim)
			if _, err := ratelimit.NewLimits(set...); err != nil {
				problem := strings.TrimPrefix(err.Error(), ratelimit.ErrInvalid.Error()+": ")
				return true, fmt.Errorf("%w: %s: the limit %q would be invalid: %s", override.ErrInvalid, overriddenFields(o), o.Policy, problem)
			}
		}
	}
	return known, nil
}

// overriddenFields names the fields of o that change a limit's numbers.
func overriddenFields(o Override) string {
	switch {
	case o.Quota != 0 && o.Window != 0:
		return "Quota and Window"
	case o.Window != 0:
		return "Window"
	}
	return "Quota"
}
