package ratelimit

import (
	"fmt"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// Limits is a set of limits that a request must all pass, checked once,
// when it is built, so that a [Store] trusts it on every request. Build it
// with [NewLimits] and reuse it. A Limiter builds its own from
// [WithLimits] and [WithRoutes].
//
// Limits is immutable and safe for concurrent use. The zero Limits holds
// no limits, and stores refuse it.
type Limits struct {
	limits []Limit
	ban    Ban // zero: none
	spec   *spec.Set
}

func init() {
	spec.Of = func(x any) *spec.Set {
		if l, ok := x.(*Limits); ok && l != nil {
			return l.spec
		}
		return nil
	}
}

// NewLimits checks limits and returns them as a set. It reports, as an
// error wrapping [ErrInvalid] and naming the field, an invalid limit (see
// [Limit]'s fields), two limits that would count into one place (the same
// algorithm and window: keep one), and two limits of one name.
func NewLimits(limits ...Limit) (*Limits, error) {
	s, problem := newLimits(limits)
	if problem != "" {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, problem)
	}
	return s, nil
}

// newLimits is NewLimits, saying what is wrong instead of an error.
func newLimits(limits []Limit) (*Limits, string) {
	if problem := checkSet(limits); problem != "" {
		return nil, problem
	}
	s := &Limits{limits: append([]Limit(nil), limits...)}
	specs := make([]spec.Limit, len(limits))
	for i, l := range limits {
		specs[i] = l.compile()
	}
	s.spec = spec.NewSet(specs)
	return s, ""
}

// Len returns the number of limits in s.
func (s *Limits) Len() int { return len(s.limits) }

// At returns the i-th limit of s, as given to [NewLimits].
func (s *Limits) At(i int) Limit { return s.limits[i] }

// checkSet describes what makes limits unusable together, or returns "".
func checkSet(limits []Limit) string {
	if len(limits) == 0 {
		return "no limits given"
	}
	for i, l := range limits {
		if field, problem := l.check(); field != "" {
			return fmt.Sprintf("limits[%d].%s %s (%v)", i, field, problem, l)
		}
		for j := range i {
			o := limits[j]
			if o.stateOf() == l.stateOf() {
				return fmt.Sprintf("limits[%d] (%v) and limits[%d] (%v) would count into one place (same algorithm and window); keep one", j, o, i, l)
			}
			if l.Name != "" && o.Name == l.Name {
				return fmt.Sprintf("limits[%d].Name %q is also the name of limits[%d]; names tell policies apart in headers", i, l.Name, j)
			}
		}
	}
	return ""
}

// stateOf keeps the fields that identify a limit's stored state: two
// limits with equal states would count into the same place.
func (l Limit) stateOf() Limit {
	l = l.withDefaults()
	s := Limit{Algorithm: l.Algorithm, Window: l.Window}
	switch l.Algorithm {
	case SlidingWindow:
		s.Precision = l.Precision
	case TokenBucket:
		s.Quota = l.Quota
	}
	return s
}
