package outbound

import (
	"context"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// A hold keeps every request of a budget the upstream said is spent
// back, in every process, until the time it said: a token bucket charged
// from usage that refills a unit a nanosecond, in each budget's set. To
// hold for d, it is charged its level plus d's nanoseconds: a request
// (whose cost takes nothing from it) fits again d later, plus its cost
// in nanoseconds.
const (
	holdName     = "hold"
	holdCapacity = 1 << 40
)

var holdLimit = ratelimit.Limit{
	Algorithm: ratelimit.TokenBucket,
	Quota:     1e12, // a unit a nanosecond
	Window:    1000 * time.Second,
	Burst:     holdCapacity,
	Usage:     true,
	Name:      holdName,
}

// claimLimit lets one caller hold a budget back until a given second:
// several responses that say the same thing at once hold it back once.
var claimLimit = ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 1, Window: time.Hour, Name: "hold-claim"}

var holdLimits, claimLimits = mustLimits(holdLimit), mustLimits(claimLimit)

func mustLimits(l ratelimit.Limit) *ratelimit.Limits {
	ls, err := ratelimit.NewLimits(l)
	if err != nil {
		panic(err) // a constant
	}
	return ls
}

// hold holds b back for d, unless it is held for as long already.
func (t *Transport) hold(ctx context.Context, b *budget, d time.Duration) error {
	until := t.now().Add(d).Unix()
	c, err := t.store.Allow(ctx, claimKey(b, until), 1, claimLimits)
	if err != nil || !c.Allowed {
		return err // another caller holds it back until then
	}
	p, err := t.store.Peek(ctx, b.key, 1, holdLimits)
	if err != nil {
		return err
	}
	units := int64(d)
	if p.Allowed {
		units += int64(p.Results()[0].Remaining)
	} else if units -= int64(p.RetryAfter); units <= 0 {
		return nil
	}
	e, err := t.store.End(ctx, b.key, int(units), holdLimits, ratelimit.Decision{})
	if err != nil || e.Allowed || e.RetryAfter <= d+time.Second {
		return err
	}
	// Another caller charged the hold between this one's Peek and its
	// charge (their claims, of different seconds, let both through), so
	// that both charged the level: the hold would last as long as it is
	// deep. It is written anew, from full.
	if err := t.store.Reset(ctx, b.key, holdLimits); err != nil {
		return err
	}
	_, err = t.store.End(ctx, b.key, int(holdCapacity+int64(d)), holdLimits, ratelimit.Decision{})
	return err
}

// claimKey is the key of the claim to hold b back until the second until.
func claimKey(b *budget, until int64) string {
	return b.key + ":hold@" + strconv.FormatInt(until, 10)
}
