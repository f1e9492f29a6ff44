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

// shared are the limits every budget learned, kept in the store beside
// its counters, where the store has a door for them (the Redis store and
// the Fallback: see store.Redis.Overrides), so that a process learns
// from another's responses rather than send a probe of its own: a hash
// with a field per budget key, holding the budget's learned limits as
// the upstream published them (an empty list when it publishes none).
type shared struct {
	k override.Keeper

	mu      sync.Mutex
	version string
	limits  map[string]string // by budget key
	read    time.Time         // when the hash was read last
	every   time.Duration     // how often it may be read
	reading bool              // a caller reads it now
}

// sharedNamespace is where the learned limits are kept: a name no
// Limiter's namespace can have (see ratelimit.New).
const sharedNamespace = "outbound:learned"

// sharedLife is how long the learned limits are kept after the last
// change or read.
const sharedLife = 24 * time.Hour

// sharedTimeout bounds a read or change of the learned limits: a store
// that is slow or down costs a request at most that, and the request
// then goes as if nothing were kept.
const sharedTimeout = 250 * time.Millisecond

// sharedPolicy is a learned limit as kept.
type sharedPolicy struct {
	Name       string `json:"name,omitempty"`
	Quota      int64  `json:"quota"`
	WindowMs   int64  `json:"window_ms,omitempty"`
	Concurrent bool   `json:"concurrent,omitempty"`
}

// get returns what is kept of the budget at key: its learned limits, as
// the policies they were learned from, and whether any are kept. One
// caller at a time reads the store, at most once every probePoll (a
// second after a failure); the others take what was read last.
func (sh *shared) get(ctx context.Context, key string) ([]ratefields.Policy, bool, error) {
	sh.mu.Lock()
	due := !sh.reading && time.Since(sh.read) >= sh.every
	known := sh.version
	sh.reading = sh.reading || due
	sh.mu.Unlock()
	var err error
	if due {
		ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
		var version string
		var fields []string
		version, fields, err = sh.k.Read(ctx, known, sharedLife)
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
	if !ok {
		return nil, false, err
	}
	var kept []sharedPolicy
	if err := json.Unmarshal([]byte(v), &kept); err != nil || len(kept) > maxLearned {
		return nil, false, nil // not ours: learned again from a response
	}
	policies := make([]ratefields.Policy, len(kept))
	for i, k := range kept {
		policies[i] = ratefields.Policy{Name: k.Name, Quota: k.Quota, Window: time.Duration(k.WindowMs) * time.Millisecond}
		if k.Concurrent {
			policies[i].Unit = "concurrent-requests"
		}
	}
	return policies, true, nil
}

// put keeps learned as the budget at key's learned limits.
func (sh *shared) put(ctx context.Context, key string, learned []ratelimit.Limit) error {
	kept := make([]sharedPolicy, len(learned))
	for i, l := range learned {
		kept[i] = sharedPolicy{Name: l.Name, Quota: int64(l.Quota), WindowMs: l.Window.Milliseconds(), Concurrent: l.Algorithm == ratelimit.Concurrent}
	}
	v, err := json.Marshal(kept)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	return sh.k.Change(ctx, "set", key, string(v), sharedLife, maxBudgets)
}

// fromShared makes b know what another process learned of its upstream,
// if the store keeps it, and reports whether b knows it now.
func (t *Transport) fromShared(ctx context.Context, b *budget) bool {
	if t.shared == nil {
		return false
	}
	policies, ok, err := t.shared.get(ctx, b.key)
	if err != nil {
		t.stats.storeErrors.Add(1)
	}
	if !ok {
		return false
	}
	if _, err := b.learn(ctx, t.store, policies, nil, 0); err != nil {
		t.stats.storeErrors.Add(1)
		return false
	}
	return true
}

// toShared keeps what b learned for the other processes.
func (t *Transport) toShared(ctx context.Context, b *budget) {
	if t.shared == nil {
		return
	}
	b.mu.Lock()
	learned := b.learned
	b.mu.Unlock()
	if err := t.shared.put(ctx, b.key, learned); err != nil {
		t.stats.storeErrors.Add(1)
	}
}
