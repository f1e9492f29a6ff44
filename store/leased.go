package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
)

// Leased limits are decided from this instance's slices when they
// suffice, else on Redis, which grants new ones: see
// docs/limits.md#hot-keys-leased-limits.
const (
	sliceTarget   = 20 * time.Millisecond
	sliceLife     = spec.SliceLife
	sliceStart    = 16
	maxLeasedKeys = 1 << 16
	sliceShards   = 64
)

// sliceEpoch starts the monotonic clock of slices.
var sliceEpoch = time.Now()

// sliceTable are a store's slices, by key.
type sliceTable struct {
	shards [sliceShards]sliceShard
	clock  func() int64 // replaces the monotonic clock: tests pin it with Redis's
}

// now is the time on the clock of slices, in ns.
func (l *sliceTable) now() int64 {
	if l.clock != nil {
		return l.clock()
	}
	return int64(time.Since(sliceEpoch))
}

type sliceShard struct {
	mu   sync.Mutex
	keys map[string]*keySlices
}

// keySlices is one key's slices, one per limit of the set that took them.
type keySlices struct {
	limits []slice
	taking chan struct{} // closed when the request asking for slices has its answer
	short  bool          // the key's last answer brought no slices
}

// slice is an instance's slice of one limit of a key: units it may spend
// until expires, and what Redis said of the limit with it.
type slice struct {
	suffix    string // the limit's
	units     int64  // left to spend
	expires   int64  // on the clock of slices
	remaining int64  // what Redis had left once it granted the slice
	resets    int64  // when the limit resets, as Redis said
	window    time.Duration
	since     int64 // when the slice was granted
	spent     int64 // units spent since
}

func (l *sliceTable) shard(key string) *sliceShard {
	return &l.shards[spec.KeyHash(key)%sliceShards]
}

func (k *keySlices) find(c *compiled) *slice {
	if i := slices.IndexFunc(k.limits, func(q slice) bool { return q.suffix == c.Suffix }); i >= 0 {
		return &k.limits[i]
	}
	return nil
}

// What a request of a leased set does next (see spend).
type sliceMiss uint8

const (
	fromSlices sliceMiss = iota // decided from the slices
	waitSlices                  // wait for the request asking for the key's slices, then spend again
	takeSlices                  // ask Redis, taking slices with the decision: then call granted or abandon
	noSlices                    // ask Redis for a plain decision, taking no slice
)

// spend decides r from this instance's slices when each has units enough
// and time left; else it says what to do. With no request of the key
// asking Redis for slices, r asks. With one, r waits for it, unless r
// waited already or the key is short: then r asks Redis on its own, so a
// request waits for at most one other's call, and a spent key's meets the
// deny cache at once.
func (l *sliceTable) spend(r *request, waited bool) (d ratelimit.Decision, next sliceMiss, wait <-chan struct{}) {
	key, cost, set := r.key, r.cost, r.set
	sh := l.shard(key)
	now := l.now()
	sh.mu.Lock()
	k := sh.keys[key]
	ok := k != nil
	if ok {
		for i := range set.Limits {
			q := k.find(&set.Limits[i])
			if q == nil || q.expires <= now || q.units < set.Limits[i].CostFor(int64(cost)) {
				ok = false
				break
			}
		}
	}
	if !ok {
		switch {
		case k == nil:
			k = sh.add(key, now)
		case k.taking != nil && (waited || k.short):
			sh.mu.Unlock()
			return d, noSlices, nil
		case k.taking != nil:
			wait = k.taking
			sh.mu.Unlock()
			return d, waitSlices, wait
		}
		k.taking = make(chan struct{})
		sh.mu.Unlock()
		return d, takeSlices, nil
	}
	var buf [limitset.MaxInline]ratelimit.Result
	rs := limitset.Results(r.limits, &buf)
	for i := range set.Limits {
		take := set.Limits[i].CostFor(int64(cost))
		q := k.find(&set.Limits[i])
		q.units -= take
		q.spent += take
		rs[i].Allowed = true
		rs[i].Remaining = int(q.remaining + q.units)
		rs[i].ResetAfter = time.Duration(max(0, q.resets-now))
		rs[i].Window = q.window
	}
	sh.mu.Unlock()
	return ratelimit.MakeDecision(rs...), fromSlices, nil
}

// add makes key's entry, in room made, past maxLeasedKeys, from keys
// whose slices are over, or any. The shard is locked.
func (sh *sliceShard) add(key string, now int64) *keySlices {
	if sh.keys == nil {
		sh.keys = make(map[string]*keySlices)
	}
	if len(sh.keys) >= maxLeasedKeys/sliceShards {
		maps.DeleteFunc(sh.keys, func(_ string, k *keySlices) bool {
			return k.taking == nil && k.over(now)
		})
		for other, k := range sh.keys {
			if len(sh.keys) < maxLeasedKeys/sliceShards {
				break
			}
			if k.taking == nil {
				delete(sh.keys, other) // its units, counted on Redis, go unspent
			}
		}
	}
	k := &keySlices{}
	sh.keys[strings.Clone(key)] = k // not the caller's buffer, which may hold more
	return k
}

func (k *keySlices) over(now int64) bool {
	return !slices.ContainsFunc(k.limits, func(q slice) bool { return q.expires > now })
}

// wants returns, per limit of set, the units key's request asks beyond cost.
func (l *sliceTable) wants(key string, set *spec.Set, out []int64) []int64 {
	sh := l.shard(key)
	now := l.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := sh.keys[key]
	for i := range set.Limits {
		want := int64(sliceStart)
		if k != nil {
			if q := k.find(&set.Limits[i]); q != nil && q.spent > 0 && now > q.since {
				rate := float64(q.spent) / float64(now-q.since)
				want = min(int64(rate*float64(sliceTarget)), 4*q.spent+sliceStart)
			}
		}
		out = append(out, max(want, 1))
	}
	return out
}

// granted records the slices Redis granted with decision d of r, asked
// for at sent (see sliceAsk), and ends the taking. d's Remaining then
// counts the units this instance holds, as a decision in process does.
func (l *sliceTable) granted(r *request, d *ratelimit.Decision, sent int64) {
	key, set, extra, life := r.key, r.set, r.ask.extra, r.ask.life
	sh := l.shard(key)
	now := l.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := sh.keys[key]
	if k == nil {
		return // dropped meanwhile (a Reset): the grant goes unspent
	}
	rs := d.Results()
	k.short = extra[0] == 0 // a set's limits are leased all or none
	for i := range set.Limits {
		q := k.find(&set.Limits[i])
		if q == nil {
			k.limits = append(k.limits, slice{suffix: set.Limits[i].Suffix})
			q = &k.limits[len(k.limits)-1]
		}
		r := &rs[i]
		q.remaining = int64(r.Remaining)
		q.resets = sent + int64(r.ResetAfter)
		q.window = r.Window
		if extra[i] == 0 {
			continue // a plain decision: what was left of the slice stays
		}
		expires := sent + life[i]*int64(time.Microsecond)
		if q.expires > now && q.units > 0 {
			q.units += extra[i]
			q.expires = min(q.expires, expires)
		} else {
			q.units, q.expires = extra[i], expires
		}
		q.since, q.spent = now, 0
		r.Remaining += int(q.units)
	}
	*d = ratelimit.MakeDecision(rs...) // rs is a copy of d's results
	l.done(k)
}

// abandon ends key's taking without a grant; short: denied by the deny cache.
func (l *sliceTable) abandon(key string, short bool) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if k := sh.keys[key]; k != nil {
		k.short = k.short || short
		l.done(k)
	}
}

// done ends k's taking. The shard is locked.
func (l *sliceTable) done(k *keySlices) {
	if k.taking != nil {
		close(k.taking)
		k.taking = nil
	}
}

// drop forgets key's slices, for a Reset.
func (l *sliceTable) drop(key string) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if k := sh.keys[key]; k != nil {
		l.done(k)
		delete(sh.keys, key)
	}
}

// leasedCode is the script code of a leased limit asking for want units
// beyond the cost, for at most sliceLife.
func leasedCode(c *compiled, want int64) string {
	return c.ScriptArgs().Code.(string) + "~" + strconv.FormatInt(want, 10) + "~" + strconv.FormatInt(int64(sliceLife/time.Microsecond), 10)
}

// errSliceWait marks such an error (see afterWait). It says nothing of
// Redis, which the other request's call judges: the Fallback decides the
// request in process without marking Redis down (faultOf).
var errSliceWait = errors.New("the request's time ran out after it waited for the answer another request of this instance was getting from Redis")

// afterWait marks err with errSliceWait if the request ran out of time.
func afterWait(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errLate) || isTimeout(err) {
		return fmt.Errorf("%w (%w)", err, errSliceWait)
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// waitForSlices waits for wait to close, until ctx ends or until, if set.
func waitForSlices(ctx context.Context, wait <-chan struct{}, until time.Time) error {
	var late <-chan time.Time // never, without until
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		late = t.C
	}
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-late:
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, errSliceWait)
	}
}
