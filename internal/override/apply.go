package override

import (
	"cmp"
	"math"
	"unsafe"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// applied is a policy's limits under some overrides.
type applied struct {
	of      []ratelimit.Limit // the policy's, which a Limiter keeps
	inForce []ratelimit.Limit
	blocked bool
}

// maxSet is the most limits a set holds (as ratelimit.Limits).
const maxSet = 8

// manyKey names the limits of a policy of several under the effects of
// t in force for them (-1 for none).
type manyKey struct {
	of      *ratelimit.Limit // the first of the policy's limits
	n       int
	effects [maxSet]int32
}

// Apply returns the limits in force for key in place of limits, as
// ratelimit.Overrides says. Most calls find them without a lock or a
// map: the table keeps, for each of its effects, what it made of the
// policy of one limit that met it last.
func (t *Table) Apply(limits []ratelimit.Limit, key string) (inForce []ratelimit.Limit, blocked, ok bool) {
	if t.Len() == 0 {
		return nil, false, false
	}
	var a *applied
	if len(limits) == 1 {
		i, e := t.Find(limits[0].Name, key)
		if e == nil {
			return nil, false, false
		}
		if a = t.memo[i].Load(); a == nil || &a.of[0] != &limits[0] {
			a = apply(limits, []int32{int32(i)}, t.effects)
			t.memo[i].Store(a)
		}
	} else {
		k := manyKey{of: &limits[0], n: len(limits)}
		found := false
		for i := range limits {
			j, _ := t.Find(limits[i].Name, key)
			k.effects[i] = int32(j)
			found = found || j >= 0
		}
		if !found {
			return nil, false, false
		}
		a = t.many.Get(k)
	}
	return a.inForce, a.blocked, true
}

// initMemo readies t's memos of what Apply made.
func (t *Table) initMemo() {
	t.memo = make([]atomicApplied, len(t.effects))
	t.many = bounded.Map[manyKey, *applied]{Max: 4096, Make: func(k manyKey) *applied {
		return apply(unsafe.Slice(k.of, k.n), k.effects[:k.n], t.effects)
	}}
}

// apply returns limits under the effects in force for each (an index
// into all, or -1): their quotas, windows and shadows replaced, the
// unlimited ones left out, or, when any is blocked, the blocked ones.
func apply(limits []ratelimit.Limit, effects []int32, all []Override) *applied {
	a := &applied{of: limits}
	var blocked []ratelimit.Limit
	for i, lim := range limits {
		switch {
		case effects[i] < 0:
			a.inForce = append(a.inForce, lim)
		case all[effects[i]].Unlimited:
		case all[effects[i]].Blocked:
			lim.Shadow = false // a block is always enforced
			blocked = append(blocked, lim)
		default:
			a.inForce = append(a.inForce, all[effects[i]].On(lim))
		}
	}
	if len(blocked) > 0 {
		a.inForce, a.blocked = blocked, true
	}
	return a
}

// On returns lim with o's quota, window and shadow. A token bucket's
// Burst, when set, scales with its quota.
func (o Override) On(lim ratelimit.Limit) ratelimit.Limit {
	quota := cmp.Or(o.Quota, lim.Quota)
	if lim.Algorithm == ratelimit.TokenBucket && lim.Burst != 0 && quota != lim.Quota {
		burst := math.Round(float64(lim.Burst) * float64(quota) / float64(lim.Quota))
		lim.Burst = int(min(max(burst, 1), wire.MaxQuota))
	}
	lim.Quota, lim.Window = quota, cmp.Or(o.Window, lim.Window)
	lim.Shadow = o.Shadow || lim.Shadow && !o.Enforced
	return lim
}
