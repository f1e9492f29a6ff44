package outbound

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/internal/ratefields"
)

// shared are the limits the budgets learned, kept beside the store's
// counters (see docs/outbound.md) under a namespace no Limiter can have:
// a field per budget key, its learned limits as policies, [] when its
// upstream publishes none. One caller at a time reads them, at most every
// probePoll (a second after a failure), and a read or change waits at
// most sharedTimeout: a store slow or down costs one request that much.
type shared struct {
	k override.Keeper

	mu      sync.Mutex
	version string
	limits  map[string]string // by budget key
	read    time.Time
	every   time.Duration
	reading bool
}

const (
	sharedNamespace = "outbound:learned"
	sharedLife      = 24 * time.Hour // after the last change or read
	sharedTimeout   = 250 * time.Millisecond
)

// get returns the policies kept of the budget at key, and whether any are.
func (sh *shared) get(ctx context.Context, key string) ([]ratefields.Policy, bool) {
	sh.mu.Lock()
	due, known := !sh.reading && time.Since(sh.read) >= sh.every, sh.version
	sh.reading = sh.reading || due
	sh.mu.Unlock()
	if due {
		ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
		version, fields, err := sh.k.Read(ctx, known, sharedLife)
		cancel()
		sh.mu.Lock()
		sh.reading, sh.read, sh.every = false, time.Now(), probePoll
		if err != nil {
			sh.every = time.Second
		} else if version != sh.version {
			sh.version, sh.limits = version, make(map[string]string, len(fields)/2)
			for i := 0; i+1 < len(fields); i += 2 {
				sh.limits[fields[i]] = fields[i+1]
			}
		}
		sh.mu.Unlock()
	}
	sh.mu.Lock()
	v, ok := sh.limits[key]
	sh.mu.Unlock()
	var policies []ratefields.Policy
	if !ok || json.Unmarshal([]byte(v), &policies) != nil || len(policies) > maxLearned {
		return nil, false // nothing, or not ours: learned again from a response
	}
	return policies, true
}

// fromShared makes b know what another process learned of its upstream,
// and reports whether it does now.
func (t *Transport) fromShared(ctx context.Context, b *budget) bool {
	if t.shared == nil {
		return false
	}
	policies, ok := t.shared.get(ctx, b.key)
	if !ok {
		return false
	}
	_, err := b.learn(ctx, t.store, policies, nil, 0)
	return err == nil
}

// toShared keeps what b learned for the other processes.
func (t *Transport) toShared(ctx context.Context, b *budget) {
	if t.shared == nil {
		return
	}
	b.mu.Lock()
	policies := make([]ratefields.Policy, len(b.learned))
	for i, l := range b.learned {
		policies[i] = ratefields.Policy{Name: l.Name, Quota: int64(l.Quota), Window: l.Window}
		if l.Algorithm == ratelimit.Concurrent {
			policies[i] = ratefields.Policy{Name: l.Name, Quota: int64(l.Quota), Unit: "concurrent-requests"}
		}
	}
	b.mu.Unlock()
	v, _ := json.Marshal(policies) // plain values
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	if err := t.shared.k.Change(ctx, "set", b.key, string(v), sharedLife, maxBudgets); err != nil {
		t.stats.storeErrors.Add(1)
	}
}
