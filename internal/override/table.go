// Package override holds a namespace's runtime overrides of its limits
// as an immutable table that a decision reads without locking: for a
// policy (a limit's name) and a key in the store's form, the override
// that applies, found in time independent of how many are set. Package
// admin keeps them in Redis; a Limiter decides under them through Apply.
package override

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/bounded"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// An Override replaces, for some keys of one policy, the policy's quota,
// window or shadow, or makes the keys unlimited or blocked. It is the one
// form of an override: admin's Go and JSON APIs, the value stored in
// Redis (its JSON without the policy and keys, which name the field), and
// what a Limiter applies. The zero Override is not valid.
type Override struct {
	// Policy is the name of the limit overridden, as the RateLimit-Policy
	// header gives it (see ratelimit.Limit's Name).
	Policy string `json:"policy"`

	// StoredKey is the keys the override applies to, in the store's form
	// (as the key function returns it, e.g. "ip:192.0.2.1"): one key; the
	// keys that start with what precedes a final "*"; or, empty, every
	// key. The most specific wins: a key's own, the longest prefix, the
	// policy's. Listings give it.
	StoredKey string `json:"stored_key,omitempty"`

	// Key is the key as a client sends it (an API key, an address), in
	// place of StoredKey, which admin.Options.Key makes of it (without
	// it, Key is in the store's form). Listings never give it.
	Key string `json:"key,omitempty"`

	// Label names StoredKey for people in listings (admin.Options.Label). A change ignores it.
	Label string `json:"label,omitempty"`

	// Quota is the quota in place of the limit's, from 1 up to what its
	// algorithm takes (see ratelimit.Limit's Quota); zero keeps the
	// limit's. For a token bucket it is the rate; a set Burst scales with it.
	Quota int `json:"quota,omitempty"`

	// Window, when not zero, is the window in place of the limit's, in
	// whole milliseconds, as ratelimit.Limit's Window ("window_ms" in
	// JSON). A calendar or Concurrent limit keeps its own.
	Window time.Duration `json:"-"`

	// Unlimited takes the keys out of the limit: it counts nothing for
	// them. Blocked denies their every request, without asking the
	// store. Each goes alone: no Quota, Window, Shadow or Enforced.
	Unlimited bool `json:"unlimited,omitempty"`
	Blocked   bool `json:"blocked,omitempty"`

	// Shadow makes the limit, for the keys, never deny (see
	// ratelimit.Limit's Shadow); Enforced makes it deny when it is shadow
	// by itself (Limit.Shadow, or ratelimit.WithDryRun). A key's override
	// takes what it leaves as the limit's from the policy's override.
	Shadow   bool `json:"shadow,omitempty"`
	Enforced bool `json:"enforced,omitempty"`
}

// MaxOverrides is how many overrides a namespace holds at most.
const MaxOverrides = 10_000

// maxKey is the longest key the store takes.
const maxKey = 1024

// ErrInvalid is wrapped by every error for an override that cannot be set.
var ErrInvalid = errors.New("override: invalid")

// Check returns what is wrong with o, naming the field and why, or nil.
func (o Override) Check() error {
	switch {
	case o.Policy == "":
		return fmt.Errorf("%w: Policy is empty: name the limit to override", ErrInvalid)
	case len(o.Policy) > wire.MaxName:
		return fmt.Errorf("%w: Policy is %d bytes; a limit's name is at most %d", ErrInvalid, len(o.Policy), wire.MaxName)
	case strings.IndexFunc(o.Policy, func(r rune) bool { return r < ' ' || r > '~' }) >= 0:
		return fmt.Errorf("%w: Policy %q is not printable ASCII, as a limit's name is", ErrInvalid, o.Policy)
	case o.Key != "" && o.StoredKey != "":
		return fmt.Errorf("%w: Key and StoredKey are both set: give one", ErrInvalid)
	case len(o.StoredKey) > maxKey || len(o.Key) > maxKey:
		return fmt.Errorf("%w: the key is %d bytes; the store takes keys of at most %d", ErrInvalid, len(o.StoredKey)+len(o.Key), maxKey)
	case strings.Contains(strings.TrimSuffix(o.StoredKey, "*"), "*"):
		return fmt.Errorf("%w: StoredKey %q has a \"*\" before its end: only a final one makes a prefix", ErrInvalid, o.StoredKey)
	case o.Quota < 0:
		return fmt.Errorf("%w: Quota is %d: want a quota above 0, or 0 to keep the limit's (Unlimited or Blocked for none or every request denied)", ErrInvalid, o.Quota)
	case o.Unlimited && o.Blocked:
		return fmt.Errorf("%w: Unlimited and Blocked are both set: choose one", ErrInvalid)
	case (o.Unlimited || o.Blocked) && (o.Quota != 0 || o.Window != 0 || o.Shadow || o.Enforced):
		return fmt.Errorf("%w: Unlimited or Blocked goes alone, without a Quota, Window, Shadow or Enforced: an unlimited key counts nothing and a blocked one is always denied", ErrInvalid)
	case o.Quota == 0 && o.Window == 0 && !o.Shadow && !o.Enforced && !o.Unlimited && !o.Blocked:
		return fmt.Errorf("%w: Quota, Window and Shadow are all the limit's own: the override changes nothing (delete it instead)", ErrInvalid)
	case o.Shadow && o.Enforced:
		return fmt.Errorf("%w: Shadow and Enforced are both set: choose one", ErrInvalid)
	case o.Window < 0 || o.Window%time.Millisecond != 0:
		return fmt.Errorf("%w: Window is %v: want zero (the limit's) or whole milliseconds", ErrInvalid, o.Window)
	}
	return nil
}

// Effect returns o without its keys and label: what it does.
func (o Override) Effect() Override {
	o.StoredKey, o.Key, o.Label = "", "", ""
	return o
}

// A Table is a set of overrides, at most one per policy and key. It is
// immutable and safe for concurrent use; the zero Table holds none.
type Table struct {
	policies map[string]*policyTable
	set      []Override // as set
	effects  []Override // the distinct overrides in force, without keys

	memo []atomicApplied                // by effect: Apply's last of a policy of one limit
	many bounded.Map[manyKey, *applied] // Apply's of policies of several limits
}

type atomicApplied = atomic.Pointer[applied]

type policyTable struct {
	whole    slot
	exact    map[string]slot // while the table is built; then index
	index    keyIndex
	prefixes map[string]slot // by the prefix, without its "*"
	lengths  []int           // of the prefixes, longest first
	ends     []byteSet       // ends[i]: the last bytes of the prefixes of lengths[i]
}

// A slot is where an override stands in its table: as set, and in
// force. Not pointers: a lookup reads no more than the map, and the
// collector follows fewer pointers.
type slot struct{ set, effect int32 }

var noSlot = slot{-1, -1}

type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// NewTable returns a table of list, or the first override that is wrong,
// named by its index; a later override of the same policy and key
// replaces an earlier one.
func NewTable(list []Override) (*Table, error) {
	t := &Table{policies: make(map[string]*policyTable)}
	for i, o := range list {
		if err := o.Check(); err != nil {
			return nil, fmt.Errorf("override %d: %w", i, err)
		}
		p := t.policies[o.Policy]
		if p == nil {
			p = &policyTable{whole: noSlot, exact: make(map[string]slot), prefixes: make(map[string]slot)}
			t.policies[o.Policy] = p
		}
		p.put(t, o)
		if len(t.set) > MaxOverrides {
			return nil, fmt.Errorf("%w: more than %d overrides; a namespace holds at most %d", ErrInvalid, MaxOverrides, MaxOverrides)
		}
	}
	index := make(map[Override]int32)
	effectOf := func(o Override) int32 {
		o = o.Effect()
		j, ok := index[o]
		if !ok {
			j = int32(len(t.effects))
			t.effects = append(t.effects, o)
			index[o] = j
		}
		return j
	}
	for _, p := range t.policies {
		inForce := func(s slot) slot {
			o := t.set[s.set]
			if p.whole.set >= 0 {
				o = o.under(&t.set[p.whole.set])
			}
			s.effect = effectOf(o)
			return s
		}
		if p.whole.set >= 0 {
			p.whole.effect = effectOf(t.set[p.whole.set])
		}
		for k, s := range p.exact {
			p.exact[k] = inForce(s)
		}
		p.index, p.exact = newKeyIndex(p.exact), nil
		for k, s := range p.prefixes {
			p.prefixes[k] = inForce(s)
		}
		slices.SortFunc(p.lengths, func(a, b int) int { return cmp.Compare(b, a) })
		p.lengths = slices.Compact(p.lengths)
		p.ends = make([]byteSet, len(p.lengths))
		for prefix := range p.prefixes {
			if prefix != "" {
				p.ends[slices.Index(p.lengths, len(prefix))].add(prefix[len(prefix)-1])
			}
		}
	}
	t.initMemo()
	return t, nil
}

// put adds o to the policy's overrides, or replaces its key's.
func (p *policyTable) put(t *Table, o Override) {
	m, k := p.exact, o.StoredKey
	prefix, isPrefix := strings.CutSuffix(o.StoredKey, "*")
	switch {
	case o.StoredKey == "":
		if p.whole.set >= 0 {
			t.set[p.whole.set] = o
		} else {
			p.whole.set = t.add(o)
		}
		return
	case isPrefix:
		m, k = p.prefixes, prefix
	}
	if s, had := m[k]; had {
		t.set[s.set] = o
		return
	}
	m[k] = slot{set: t.add(o), effect: -1}
	if isPrefix {
		p.lengths = append(p.lengths, len(k))
	}
}

func (t *Table) add(o Override) int32 {
	t.set = append(t.set, o)
	return int32(len(t.set) - 1)
}

// Len returns how many overrides t holds.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.set)
}

// Has reports whether t holds an override of policy, for any key.
func (t *Table) Has(policy string) bool { return t != nil && t.policies[policy] != nil }

// Get returns the override set for policy and key, which Key names as
// the override does ("" for the whole policy, "x*" for a prefix).
func (t *Table) Get(policy, key string) (Override, bool) {
	if t == nil || t.policies[policy] == nil {
		return Override{}, false
	}
	p, s, ok := t.policies[policy], noSlot, false
	switch prefix, isPrefix := strings.CutSuffix(key, "*"); {
	case key == "":
		s, ok = p.whole, p.whole.set >= 0
	case isPrefix:
		s, ok = p.prefixes[prefix]
	default:
		s, ok = p.index.find(key)
	}
	if !ok {
		return Override{}, false
	}
	return t.set[s.set], true
}

// Lookup returns the override of policy that applies to key: its own,
// else the longest prefix of it, else the policy's, taking the fields it
// leaves as the limit's from the policy's override. It looks up at most
// one key and one prefix per distinct prefix length.
func (t *Table) Lookup(policy, key string) (Override, bool) {
	s, ok := t.lookup(policy, key)
	if !ok {
		return Override{}, false
	}
	o := t.effects[s.effect]
	o.StoredKey = t.set[s.set].StoredKey
	return o, true
}

// Find is Lookup returning the override in force, without keys (see
// Override.Effect), and its index among the table's distinct effects,
// or -1 and nil. A policy's overrides of the same effect share it.
func (t *Table) Find(policy, key string) (int, *Override) {
	if s, ok := t.lookup(policy, key); ok {
		return int(s.effect), &t.effects[s.effect]
	}
	return -1, nil
}

func (t *Table) lookup(policy, key string) (slot, bool) {
	if t != nil {
		if p := t.policies[policy]; p != nil {
			return p.lookup(key)
		}
	}
	return noSlot, false
}

// under returns o with the fields it leaves as the limit's taken from w, the policy's.
func (o *Override) under(w *Override) Override {
	v := *o
	if v.Unlimited || v.Blocked {
		return v // alone
	}
	if w.Unlimited || w.Blocked {
		if v.Quota == 0 {
			// No quota of its own: the policy's override holds.
			return Override{Policy: v.Policy, StoredKey: v.StoredKey, Unlimited: w.Unlimited, Blocked: w.Blocked}
		}
		return v
	}
	if v.Quota == 0 {
		v.Quota = w.Quota
	}
	if v.Window == 0 {
		v.Window = w.Window
	}
	if !v.Shadow && !v.Enforced {
		v.Shadow, v.Enforced = w.Shadow, w.Enforced
	}
	return v
}

// lookup returns the slot of the policy's most specific override for
// key. A prefix length whose prefixes all end in another byte than the
// key's there costs no map lookup.
func (p *policyTable) lookup(key string) (slot, bool) {
	if s, ok := p.index.find(key); ok {
		return s, true
	}
	for i, n := range p.lengths {
		if n > len(key) || n > 0 && !p.ends[i].has(key[n-1]) {
			continue
		}
		if s, ok := p.prefixes[key[:n]]; ok {
			return s, true
		}
	}
	return p.whole, p.whole.set >= 0
}

// All returns t's overrides, by policy, then key.
func (t *Table) All() []Override {
	if t == nil {
		return nil
	}
	all := slices.Clone(t.set)
	slices.SortFunc(all, func(a, b Override) int {
		return cmp.Or(strings.Compare(a.Policy, b.Policy), strings.Compare(a.StoredKey, b.StoredKey))
	})
	return all
}
