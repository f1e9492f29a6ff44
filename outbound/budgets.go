package outbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/internal/ratefields"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// A budget is what an upstream allows one partition of the caller: the
// limits declared for the upstream and those its responses published,
// kept in the store under one key.
type budget struct {
	upstream string
	key      string // the store's: "outbound:" upstream ":" the partition's hash
	declared []ratelimit.Limit
	usage    bool // a declared limit is charged from usage

	mu      sync.Mutex // learning
	known   bool       // a response of the upstream has come
	learned []ratelimit.Limit
	counted map[string]*ratelimit.Limits // the learned limits counted in requests, alone by name, and together under ""
	learnt  chan struct{}                // closed once known
	// windows are the windows inferred of the policies that state none
	// (X-RateLimit-*), by name: the longest reset seen.
	windows map[string]time.Duration
	why     string // what held the budget back last, as this process saw it

	sets atomic.Pointer[sets]

	// bridge holds this process's requests back (until, in unix
	// nanoseconds) from a response saying the budget is spent until the
	// store holds it (see Transport.hold): none admitted meanwhile is sent.
	bridge atomic.Int64
}

// sets are the limits of a budget at a time: the declared, the learned,
// the hold and, until a response of the upstream has come, the probe; and
// the same without the hold, for End, which must not charge it.
type sets struct {
	limits, ending *ratelimit.Limits
	probe          bool // limits hold the probe
}

// budgets are a Transport's, by upstream and partition: past maxBudgets
// they start afresh (what they counted is in the store).
type budgets struct {
	t *Transport
	m bounded.Map[budgetKey, made]
}

type budgetKey struct{ upstream, partition string }

// made is a budget, or why it could not be made.
type made struct {
	b   *budget
	err error
}

const maxBudgets = 10_000

// maxKey is the longest store key a budget may have: the store's bound,
// less room for the hold's suffix.
const maxKey = 1000

func (bs *budgets) init(t *Transport) {
	bs.t = t
	bs.m = bounded.Map[budgetKey, made]{Max: maxBudgets, Make: func(k budgetKey) made {
		key := "outbound:" + k.upstream + ":" + k.partition
		if len(key) > maxKey {
			return made{err: fmt.Errorf("%w: outbound: the request's host is %d bytes long", ratelimit.ErrInvalid, len(k.upstream))}
		}
		b := &budget{upstream: k.upstream, key: key, declared: t.declared[k.upstream], learnt: make(chan struct{})}
		b.windows = map[string]time.Duration{}
		b.usage = slices.ContainsFunc(b.declared, func(l ratelimit.Limit) bool { return l.Usage })
		s, err := b.build(nil, len(b.declared) == 0)
		if err != nil {
			return made{err: err} // WithLimits checked these limits
		}
		b.sets.Store(s)
		return made{b: b}
	}}
}

// of returns the budget req spends.
func (bs *budgets) of(req *http.Request) (*budget, error) {
	upstream := lower(req.URL.Host)
	if upstream == "" {
		return nil, fmt.Errorf("%w: outbound: the request's URL has no host", ratelimit.ErrInvalid)
	}
	var partition string
	if bs.t.partition != nil {
		if p := bs.t.partition(req); p != "" {
			sum := sha256.Sum256([]byte(p))
			partition = hex.EncodeToString(sum[:16])
		}
	}
	m := bs.m.Get(budgetKey{upstream, partition})
	return m.b, m.err
}

const maxLearned = 4 // limits a budget learns at most

// learn makes b's limits those declared and those of the policies a
// response published: per window (or in flight), one limit at the least
// quota published, unless a declared limit has its shape; a policy with
// no window takes the longest reset seen (see windowed). The probe of
// cost probe (0: none) is counted under the limits it taught before they
// are b's, so that no request is admitted under them uncounted.
func (b *budget) learn(ctx context.Context, s ratelimit.Store, policies []ratefields.Policy, limits []ratefields.Limit, probe int) (changed bool, err error) {
	policies = b.windowed(policies, limits)
	var learned []ratelimit.Limit
	for _, p := range policies {
		var l ratelimit.Limit
		switch {
		case p.Quota < 1 || p.Quota > wire.MaxQuota:
			continue
		case p.Unit == "concurrent-requests":
			l = ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: int(p.Quota), Name: p.Name}
		case (p.Unit == "" || p.Unit == "requests") && p.Window >= time.Second && p.Window%time.Second == 0:
			l = ratelimit.Limit{Quota: int(p.Quota), Window: p.Window, Name: p.Name}
		default:
			continue // content bytes, or no window: what the upstream says of it is still heard, when spent
		}
		l.Name = learnedName(l.Name)
		if slices.ContainsFunc(b.declared, func(d ratelimit.Limit) bool { return sameShape(d, l) }) {
			continue
		}
		if i := slices.IndexFunc(learned, func(d ratelimit.Limit) bool { return sameShape(d, l) }); i >= 0 {
			if l.Quota < learned[i].Quota {
				learned[i] = l
			}
			continue
		}
		if len(learned) < maxLearned {
			learned = append(learned, l)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.known && slices.Equal(learned, b.learned) {
		return false, nil
	}
	next, err := b.build(learned, false)
	if err != nil {
		learned = nil // a published policy the store cannot keep
		if next, err = b.build(nil, false); err != nil {
			return false, err // WithLimits checked the declared limits
		}
	}
	b.counted = counted(learned)
	if all := b.counted[""]; probe > 0 && all != nil {
		_, err = s.Allow(ctx, b.key, probe, all)
	}
	b.sets.Store(next)
	if !b.known {
		close(b.learnt)
	}
	b.known, b.learned = true, learned
	return true, err
}

// windowed returns policies with the window of each that states none
// (counted in requests) inferred from limits: the longest reset of its
// limit seen so far, in whole seconds.
func (b *budget) windowed(policies []ratefields.Policy, limits []ratefields.Limit) []ratefields.Policy {
	out := slices.Clone(policies)
	for i, p := range policies {
		if p.Unit != "" && p.Unit != "requests" {
			continue
		}
		// Kept by the name the budget gives the limit, so that a window
		// another process kept (see shared) counts for the policy that
		// states none here: a window that changes changes the limit's
		// state, and starts its count afresh.
		key, seen := learnedName(p.Name), p.Window
		if j := slices.IndexFunc(limits, func(l ratefields.Limit) bool { return l.Name == p.Name && l.Reset > 0 }); seen == 0 && j >= 0 {
			seen = limits[j].Reset.Truncate(time.Second) // a Unix time in whole seconds is a ceiling
		}
		b.mu.Lock()
		if seen > b.windows[key] && len(b.windows) < maxLearned {
			b.windows[key] = seen
		}
		if p.Window == 0 {
			out[i].Window = b.windows[key] // 0, as p's, when none was kept
		}
		b.mu.Unlock()
	}
	return out
}

// sameShape reports whether a and b count in one state: same algorithm and window.
func sameShape(a, b ratelimit.Limit) bool {
	return a.Algorithm == b.Algorithm && a.Window == b.Window
}

// build returns the sets of b's declared limits and learned, with the probe.
func (b *budget) build(learned []ratelimit.Limit, probe bool) (*sets, error) {
	all := append(slices.Clip(b.declared), learned...)
	if probe {
		all = append(all, probeLimit)
	}
	s := &sets{probe: probe}
	var err error
	if len(all) > 0 {
		if s.ending, err = ratelimit.NewLimits(all...); err != nil {
			return nil, err
		}
	}
	if s.limits, err = ratelimit.NewLimits(append(all, holdLimit)...); err != nil {
		return nil, err
	}
	return s, nil
}

// probeLimit lets a single request, across every process, go to an
// upstream the budget knows nothing of: its answer teaches the others.
var probeLimit = ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 1, Name: "probe"}

// catchUp takes from b's learned limit named as l what the upstream
// counted beyond b (another client of the budget, or a count begun
// earlier). Requests the upstream has not counted yet only make b's
// count larger, so it never takes what b spent. It asks the store only
// when d, the decision l answered, left more than l.
func (b *budget) catchUp(ctx context.Context, s ratelimit.Store, l ratefields.Limit, d ratelimit.Decision) error {
	name := learnedName(l.Name)
	var left int64 = -1
	for _, r := range d.Results() {
		if r.Limit.Name == name && r.Limit.Algorithm != ratelimit.Concurrent {
			left = int64(r.Remaining)
		}
	}
	if left <= l.Remaining {
		return nil
	}
	b.mu.Lock()
	one := b.counted[name]
	b.mu.Unlock()
	if one == nil {
		return nil
	}
	p, err := s.Peek(ctx, b.key, 1, one)
	if err != nil {
		return err
	}
	if behind := int64(p.Results()[0].Remaining) - l.Remaining; behind > 0 {
		_, err = s.Allow(ctx, b.key, int(behind), one)
	}
	return err
}

// counted returns learned's limits counted in requests: each by name, all under "".
func counted(learned []ratelimit.Limit) map[string]*ratelimit.Limits {
	m := map[string]*ratelimit.Limits{}
	var all []ratelimit.Limit
	for _, l := range learned {
		if l.Algorithm == ratelimit.Concurrent {
			continue
		}
		if one, err := ratelimit.NewLimits(l); err == nil {
			m[l.Name], all = one, append(all, l)
		}
	}
	if ls, err := ratelimit.NewLimits(all...); err == nil && len(all) > 0 {
		m[""] = ls
	}
	return m
}

// learnedName is the name a budget gives the limit of a policy named
// name: "upstream" for one the upstream names not (drafts 6 and 7,
// X-RateLimit-*), or names as a budget cannot.
func learnedName(name string) string {
	if name == "" || name == holdName || len(name) > wire.MaxName {
		return "upstream"
	}
	return name
}
