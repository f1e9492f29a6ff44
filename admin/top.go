package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/topkeys"
)

// A TopKey is a key that a policy denied, with how often: the estimate,
// and the range the true count lies in, at most N/128 wide, N being the
// policy's denials over the window on every instance (see [Plane.Top]).
type TopKey struct {
	// Key is the key as the store is given it, as Override's Key; Label
	// what Options.Label calls it, if anything.
	Key   string `json:"key"`
	Label string `json:"label,omitempty"`
	// Denied estimates the requests the policy denied the key, or would
	// have denied it for a shadow limit. Low and High bound the truth.
	Denied int64 `json:"denied"`
	Low    int64 `json:"low"`
	High   int64 `json:"high"`
}

// The sketches of the keys denied, per policy (at most maxTopPolicies)
// and window (see topWindows), each slot of sketchCounters counters.
const (
	sketchCounters = 128
	maxTopPolicies = 64
	summaryKeys    = 100             // the keys an instance tells the others, per policy and window
	publishEvery   = 5 * time.Second // how often it tells them
)

// A window of the top keys: its name in Redis, and its sketches' slots.
type topWindow struct {
	name  string
	width time.Duration
	slots int
}

// shadowSuffix names, after a policy's name, its would-be denials: a name has no tab.
const shadowSuffix = "\tshadow"

var topWindows = [...]topWindow{{"1m", 10 * time.Second, 6}, {"1h", 5 * time.Minute, 12}}

type topPolicy struct {
	mu      sync.Mutex
	windows [len(topWindows)]*topkeys.Window
}

// topCounts are an instance's sketches of the keys denied, by policy.
type topCounts struct {
	instance string // names this instance's fields in Redis
	mu       sync.Mutex
	policies map[string]*topPolicy
	now      func() time.Time // under mu: a test pins it
}

func newTopCounts() topCounts {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return topCounts{instance: hex.EncodeToString(id[:]), policies: make(map[string]*topPolicy), now: time.Now}
}

// Denied counts a request that a policy denied, or would have denied (a
// Shadow limit's, counted apart), and keeps a ban it tells of: a Limiter
// given the Plane tells it (see ratelimit.WithOverrides). Past 64
// policies, a new one is not counted.
func (p *Plane) Denied(policy, key string, shadow bool, banned time.Duration) {
	if banned > 0 {
		p.bans.add(key, time.Now().Add(banned))
	}
	if shadow {
		policy += shadowSuffix
	}
	c := &p.top
	c.mu.Lock()
	tp := c.policies[policy]
	if tp == nil && len(c.policies) < maxTopPolicies {
		tp = &topPolicy{}
		for i, w := range topWindows {
			tp.windows[i] = topkeys.NewWindow(sketchCounters, w.width, w.slots)
		}
		c.policies[policy] = tp
	}
	clock := c.now
	c.mu.Unlock()
	if tp == nil {
		return
	}
	now := clock()
	tp.mu.Lock()
	for _, w := range tp.windows {
		w.Add(now, key, 1)
	}
	tp.mu.Unlock()
}

// summary returns this instance's summary of policy's denials over window i, if any.
func (c *topCounts) summary(policy string, i int) (topkeys.Summary, bool) {
	c.mu.Lock()
	tp, clock := c.policies[policy], c.now
	c.mu.Unlock()
	if tp == nil {
		return topkeys.Summary{}, false
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	s := topkeys.Summarize(summaryKeys, tp.windows[i].Sketches(clock())...)
	return s, s.Total > 0
}

// publish writes this instance's summaries to Redis, for the others.
func (p *Plane) publish(ctx context.Context) error {
	c := &p.top
	c.mu.Lock()
	policies := slices.Collect(maps.Keys(c.policies))
	c.mu.Unlock()
	var fields []string
	for _, policy := range policies {
		for i, w := range topWindows {
			s, ok := c.summary(policy, i)
			if !ok {
				continue
			}
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			fields = append(fields, c.instance+"\n"+w.name+"\n"+policy, string(b))
		}
	}
	if len(fields) == 0 {
		return nil
	}
	if err := p.keeper.PutTop(ctx, 2*time.Hour, time.Hour+time.Minute, fields); err != nil {
		return fmt.Errorf("admin: telling the keys denied most: %w", err)
	}
	return nil
}

// Top returns the n keys that policy denied most on every instance over
// the last minute (last is time.Minute) or hour (time.Hour), most first;
// policy + " (shadow)" gives a Shadow limit's would-be denials. See
// docs/overrides.md for how instances merge their counts. Keys are in
// the store's form, maybe a client's IP: for operators only.
func (p *Plane) Top(ctx context.Context, policy string, last time.Duration, n int) ([]TopKey, error) {
	w, ok := map[time.Duration]int{time.Minute: 0, time.Hour: 1}[last]
	if !ok {
		return nil, fmt.Errorf("%w: Top: last is %v: want time.Minute or time.Hour", errInvalid, last)
	}
	if name, ok := strings.CutSuffix(policy, " (shadow)"); ok {
		policy = name + shadowSuffix
	}
	reply, err := p.keeper.GetTop(ctx, 3*publishEvery, topWindows[w].name, policy)
	if err != nil {
		return nil, fmt.Errorf("admin: reading the keys denied most: %w", err)
	}
	var summaries []topkeys.Summary
	for j := 0; j+1 < len(reply); j += 2 {
		if reply[j] == p.top.instance {
			continue // this instance's own, as it is now, below
		}
		var s topkeys.Summary
		if err := json.Unmarshal([]byte(reply[j+1]), &s); err != nil {
			return nil, fmt.Errorf("admin: the keys denied most, as an instance told them: %w", err)
		}
		summaries = append(summaries, s)
	}
	if s, ok := p.top.summary(policy, w); ok {
		summaries = append(summaries, s)
	}
	counts := topkeys.Merge(max(n, 0), summaries...)
	top := make([]TopKey, len(counts))
	for j, c := range counts {
		top[j] = TopKey{Key: c.Key, Label: p.labelOf(c.Key), Denied: c.N, Low: c.Low, High: c.High}
	}
	return top, nil
}

func (p *Plane) labelOf(key string) string {
	if p.opts.Label == nil || key == "" {
		return ""
	}
	return p.opts.Label(key)
}

// bans are the keys this instance saw banned, until when, at most
// maxBans, those ending first going first.
type bans struct {
	mu    sync.Mutex
	until map[string]time.Time
}

const maxBans = 256

func (b *bans) add(key string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until == nil {
		b.until = map[string]time.Time{}
	}
	if _, ok := b.until[key]; !ok && len(b.until) >= maxBans {
		deleteFirst(b.until)
	}
	b.until[key] = until
}

// deleteFirst deletes the key of m whose time comes first.
func deleteFirst(m map[string]time.Time) {
	delete(m, slices.MinFunc(slices.Collect(maps.Keys(m)), func(a, b string) int { return m[a].Compare(m[b]) }))
}

type banView struct {
	Key   string    `json:"key"`
	Label string    `json:"label,omitempty"`
	Until time.Time `json:"until"`
}

// inForce returns the bans not over at now, ending last first.
func (b *bans) inForce(now time.Time, label func(string) string) []banView {
	b.mu.Lock()
	defer b.mu.Unlock()
	list := []banView{}
	for k, t := range b.until {
		if !now.Before(t) {
			delete(b.until, k)
			continue
		}
		list = append(list, banView{Key: k, Label: label(k), Until: t})
	}
	slices.SortFunc(list, func(a, b banView) int { return b.Until.Compare(a.Until) })
	return list
}
