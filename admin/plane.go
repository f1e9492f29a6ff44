package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/internal/wire"
	"github.com/ratelimit-go/ratelimit/lua"
)

// An Override replaces, for some keys of one policy, the policy's limit:
// its quota, its window, or both; or it makes the keys unlimited, or
// blocks them. The zero Override is not valid: name a policy, and change
// something.
type Override struct {
	// Policy is the name of the limit overridden, as the RateLimit-Policy
	// header gives it (see ratelimit.Limit's Name).
	Policy string

	// Key is which of the policy's keys the override applies to, in the
	// form the store is given, after the key function (hashed where it
	// hashes, as ratelimit.HeaderKey does): for example "ip:192.0.2.1". It is
	// one key; or every key that starts with what comes before a final
	// "*"; or, empty, every key of the policy. The override of a key's own
	// beats that of a prefix, a longer prefix a shorter one, and any of
	// them the whole policy's.
	Key string

	// Quota is the quota in place of the limit's, from 1 up to what the
	// limit's algorithm takes (see ratelimit.Limit's Quota); zero keeps
	// the limit's. For a token bucket it is the rate, and a Burst that was
	// set scales with it.
	Quota int

	// Window, when not zero, is the window in place of the limit's, in
	// whole milliseconds, as ratelimit.Limit's Window. A calendar or
	// Concurrent limit keeps its own.
	Window time.Duration

	// Unlimited takes the keys out of the limit: it counts nothing for
	// them. Blocked denies every request of the keys, without asking the
	// store, whatever Shadow says. Each goes without a Quota or Window.
	Unlimited, Blocked bool

	// Shadow makes the limit, for the keys, decided and counted but never
	// denying (see ratelimit.Limit's Shadow); Enforced makes it deny for
	// them when it is shadow by itself (Limit.Shadow, or
	// ratelimit.WithDryRun). Neither leaves it as it is. A key's override
	// that leaves a field as the limit's takes it from the whole policy's
	// override, when there is one: SetShadow puts a whole policy in
	// shadow, or back, for every key.
	Shadow, Enforced bool
}

// internal returns o as the table holds it.
func (o Override) internal() (override.Override, error) {
	v := override.Override{Policy: o.Policy, Key: o.Key, Quota: o.Quota, Window: o.Window, Shadow: o.Shadow, Enforce: o.Enforced}
	switch {
	case o.Unlimited && o.Blocked:
		return v, fmt.Errorf("%w: Unlimited and Blocked are both set: choose one", ErrInvalid)
	case (o.Unlimited || o.Blocked) && (o.Quota != 0 || o.Window != 0):
		return v, fmt.Errorf("%w: Unlimited or Blocked goes without a Quota or Window, got Quota %d, Window %v", ErrInvalid, o.Quota, o.Window)
	case o.Quota < 0:
		return v, fmt.Errorf("%w: Quota is %d: want a quota above 0, or 0 to keep the limit's", ErrInvalid, o.Quota)
	case o.Unlimited:
		v.Quota = override.Unlimited
	case o.Blocked:
		v.Quota = override.Blocked
	}
	if err := v.Check(); err != nil {
		return v, fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(err.Error(), override.ErrInvalid.Error()+": "))
	}
	return v, nil
}

// external returns the Override of v.
func external(v override.Override) Override {
	o := Override{Policy: v.Policy, Key: v.Key, Window: v.Window, Shadow: v.Shadow, Enforced: v.Enforce}
	switch v.Quota {
	case override.Unlimited:
		o.Unlimited = true
	case override.Blocked:
		o.Blocked = true
	default:
		o.Quota = v.Quota
	}
	return o
}

// ErrInvalid is wrapped by every error for an override that cannot be
// set, which names the field at fault. It wraps ratelimit.ErrInvalid.
var ErrInvalid = fmt.Errorf("%w: admin", ratelimit.ErrInvalid)

// Options configures [New]. The zero value means every default.
type Options struct {
	// Prefix starts the key of the overrides in Redis: Prefix +
	// "overrides:{" + namespace + "}". Give it the store's
	// (store.RedisOptions' Prefix), so that one prefix holds all of an
	// application's keys. Empty means "rl:", the store's default.
	Prefix string

	// Logger receives the Plane's warnings: Redis not answering its reads
	// (once as it starts failing, once as it answers again). Nil means
	// slog.Default().
	Logger *slog.Logger

	// Key turns the key a client sends for policy, such as an API key,
	// into the key the store is given, as the key function of the
	// policy's Limiter does, for the "key" of the handler's endpoints
	// (see [Plane.Handler]). Nil: they take the store's form.
	Key func(policy, clientKey string) (string, error)

	// Who names who made a change through the handler, for its audit
	// event: for example the operator the application's authentication
	// found. Nil: the request's remote address.
	Who func(r *http.Request) string

	// Label names a key in the store's form for people, in the handler's
	// listings and page ("label"): for example the customer whose API
	// key hashes to it. Nil, or "": none.
	Label func(storedKey string) string
}

// A Plane holds a namespace's overrides in Redis, where every instance
// of the service reads them, and the overrides it read last in process,
// where each decision of a Limiter given the Plane (see
// ratelimit.WithOverrides) finds its override with no call to Redis.
//
// Every instance's Plane reads the overrides every 250ms, one script
// run, which carries them all only when they changed, so a change made
// on one instance applies on every other within that period and a read:
// about 250ms, see docs/overrides.md for what was measured. A change is
// applied whole: a decision sees the overrides before it or after it.
// While Redis fails, an instance keeps deciding with the overrides it
// read last; one that has read none yet applies none, and says so
// (List reports false), until Redis answers.
//
// Build it with [New], and Close it when done; the zero Plane is not
// usable. A Plane is safe for concurrent use.
type Plane struct {
	client redis.Scripter
	key    string
	life   time.Duration
	most   int
	logger *slog.Logger

	mu      sync.Mutex // one read at a time
	version string     // of table; "" before the first read
	table   atomic.Pointer[override.Table]
	failing atomic.Bool // the last read failed, and it was logged

	limitersMu sync.Mutex
	limiters   []override.Limiter // those given the Plane

	topKey string    // the hash of every instance's keys denied most
	top    topCounts // this instance's

	keyOf func(string, string) (string, error) // Options.Key
	who   func(*http.Request) string           // Options.Who
	label func(string) string                  // Options.Label

	stop context.CancelFunc
	done chan struct{}
}

// overridesLife is how long the overrides stay in Redis after the last change or
// the last read that renewed them (a read renews them once half of it has
// passed): as long as any instance runs, and that long after.
const overridesLife = 30 * 24 * time.Hour

// syncEvery is how often a Plane reads the overrides.
const syncEvery = 250 * time.Millisecond

// readTimeout bounds each read of the overrides.
const readTimeout = time.Second

// New returns the Plane of namespace's overrides, kept in Redis through
// client (a *redis.Client, a *redis.ClusterClient, or a failover
// client), and starts reading them every 250ms until Close. It reads
// them once before it returns; when Redis does not answer that read, it
// logs so and returns a Plane that has read none yet. The namespace
// names the overrides in Redis: give it that of the Limiters it serves
// (see ratelimit.New), or one for several namespaces whose Limiters then
// share overrides by policy name.
func New(client redis.Scripter, namespace string, opts Options) (*Plane, error) {
	switch {
	case client == nil:
		return nil, fmt.Errorf("%w: New: the client is nil", ErrInvalid)
	case namespace == "" || len(namespace) > wire.MaxName || strings.ContainsAny(namespace, "{}"):
		return nil, fmt.Errorf("%w: New: namespace %q: want 1 to %d bytes, without '{' or '}', as the Limiter's", ErrInvalid, namespace, wire.MaxName)
	case strings.ContainsAny(opts.Prefix, "{}"):
		return nil, fmt.Errorf("%w: Options.Prefix %q may not contain '{' or '}', which would change the hash tag", ErrInvalid, opts.Prefix)
	}
	prefix := cmp.Or(opts.Prefix, wire.DefaultPrefix)
	p := &Plane{
		client: client,
		key:    prefix + "overrides:{" + namespace + "}",
		topKey: prefix + "top:{" + namespace + "}",
		top:    newTopCounts(),
		keyOf:  opts.Key,
		who:    opts.Who,
		label:  opts.Label,
		life:   overridesLife,
		most:   override.MaxOverrides,
		logger: cmp.Or(opts.Logger, slog.Default()),
		done:   make(chan struct{}),
	}
	ctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	p.read(ctx)
	go p.run(ctx)
	return p, nil
}

// Close stops the Plane's reads. A Limiter given it keeps the overrides
// read last.
func (p *Plane) Close() error {
	p.stop()
	<-p.done
	return nil
}

// run reads the overrides every syncEvery until ctx ends.
func (p *Plane) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(syncEvery)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.read(ctx)
		}
		if tick%int(publishEvery/syncEvery) == 0 {
			publishCtx, cancel := context.WithTimeout(ctx, readTimeout)
			if err := p.publish(publishCtx); err != nil && ctx.Err() == nil && !p.failing.Load() {
				p.logger.Warn("admin: telling the other instances the keys denied most failed", slog.String("error", err.Error()))
			}
			cancel()
		}
	}
}

// read syncs once, within readTimeout, and logs a change between failing
// and not.
func (p *Plane) read(ctx context.Context) {
	readCtx, cancel := context.WithTimeout(ctx, readTimeout)
	err := p.sync(readCtx)
	cancel()
	switch {
	case ctx.Err() != nil: // closed
	case err != nil && !p.failing.Swap(true):
		msg := "admin: reading the overrides failed; deciding with the ones read last"
		if p.table.Load() == nil {
			msg = "admin: reading the overrides failed; none are known yet, so none apply"
		}
		p.logger.Warn(msg, slog.String("key", p.key), slog.String("error", err.Error()))
	case err == nil && p.failing.Swap(false):
		p.logger.Info("admin: reading the overrides again", slog.String("key", p.key))
	}
}

// Hooks returns what a Limiter given the Plane calls (see
// ratelimit.Overrides): the overrides read last, nil before the first
// read; Attach, with which ratelimit.New tells the Plane of a Limiter
// (Set checks an override against its limits, the handler lists them,
// and tells it of the changes made); and Denied, which counts the keys
// its limits deny (see Top).
func (p *Plane) Hooks() override.Hooks {
	return override.Hooks{Table: p.table.Load, Attach: p.attach, Denied: p.denied}
}

// attach adds a Limiter given the Plane.
func (p *Plane) attach(l override.Limiter) {
	p.limitersMu.Lock()
	defer p.limitersMu.Unlock()
	p.limiters = append(p.limiters, l)
}

// attached returns the Limiters given the Plane.
func (p *Plane) attached() []override.Limiter {
	p.limitersMu.Lock()
	defer p.limitersMu.Unlock()
	return p.limiters
}

// List returns the overrides this instance applies, by policy, then key,
// and whether it has read them from Redis yet.
func (p *Plane) List() ([]Override, bool) {
	t := p.table.Load()
	if t == nil {
		return nil, false
	}
	all := t.All()
	list := make([]Override, len(all))
	for i, v := range all {
		list[i] = external(v)
	}
	return list, true
}

var script = redis.NewScript(lua.Source("override.lua"))

// Set stores o in place of the override of its policy and key, for
// every instance, then reads the overrides, so that this instance
// applies it at once. It checks o first, and refuses it, before
// anything is written, with an error wrapping ErrInvalid that names the
// field: a field out of range, a policy that no Limiter given the Plane
// has (when any is), a quota or window the policy's limit cannot take
// (as ratelimit.NewLimits would say), or a new override past the most a
// namespace holds (10,000).
func (p *Plane) Set(ctx context.Context, o Override) error {
	v, err := o.internal()
	if err != nil {
		return err
	}
	if err := p.check(v); err != nil {
		return err
	}
	value, err := json.Marshal(stored{Quota: v.Quota, WindowMS: v.Window.Milliseconds(), Shadow: v.Shadow, Enforce: v.Enforce})
	if err != nil {
		return err
	}
	err = script.Run(ctx, p.client, []string{p.key}, "set", field(v.Policy, v.Key), value, p.life.Milliseconds(), p.most).Err()
	if err != nil && strings.Contains(err.Error(), "overrides full") {
		return fmt.Errorf("%w: %d overrides are set, the most a namespace holds: delete one first", ErrInvalid, p.most)
	}
	if err != nil {
		return fmt.Errorf("admin: setting an override of %s: %w", v.Policy, aclHint(err))
	}
	return p.sync(ctx)
}

// aclHint adds to an error of an ACL user that may not run a command of
// the script what its rule needs: the store's ACL rule, which covers the
// overrides (store.ACLRule), and the command Redis named, in its wording
// or Valkey's ("has no permissions to run the 'hget' command").
func aclHint(err error) error {
	msg := err.Error()
	i := strings.Index(msg, "can't run this command")
	if i < 0 {
		i = strings.Index(msg, "has no permissions to run")
	}
	if i < 0 {
		return err
	}
	if _, rest, ok := strings.Cut(msg[i:], "'"); ok {
		if name, _, ok := strings.Cut(rest, "'"); ok && name != "" {
			return fmt.Errorf("%w; the ACL user may not run %s: give it the store's ACL rule (store.ACLRule), which covers the overrides", err, strings.ToLower(name))
		}
	}
	return fmt.Errorf("%w; give the ACL user the store's ACL rule (store.ACLRule), which covers the overrides", err)
}

// check runs the Limiters' checks of v.
func (p *Plane) check(v override.Override) error {
	limiters := p.attached()
	known := len(limiters) == 0
	for _, l := range limiters {
		ok, err := l.Check(v)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(err.Error(), override.ErrInvalid.Error()+": "))
		}
		known = known || ok
	}
	if !known {
		return fmt.Errorf("%w: Policy %q is the name of no limit of the Limiters given this Plane (of the limits of WithLimitsFunc, those of the sets it returned so far)", ErrInvalid, v.Policy)
	}
	return nil
}

// SetShadow puts policy, for every key, in shadow (decided and counted,
// never denying; see ratelimit.Limit's Shadow) or, with shadow false,
// enforces it, for every instance, then reads the overrides. It changes
// only that of the policy's override for every key (Key ""), keeping
// its quota and window, in one step that no other change can split; a
// key's own override that says Shadow or Enforced still wins for that
// key. Enforcing a policy that the Limiters given the Plane configure,
// none as shadow by itself, leaves it its own: nothing of shadow stays in
// the override, which goes when nothing else is in it.
// It checks the policy as Set does.
func (p *Plane) SetShadow(ctx context.Context, policy string, shadow bool) error {
	v := override.Override{Policy: policy, Shadow: shadow, Enforce: !shadow}
	if err := v.Check(); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(err.Error(), override.ErrInvalid.Error()+": "))
	}
	if err := p.check(v); err != nil {
		return err
	}
	mode := "enforce"
	switch {
	case shadow:
		mode = "shadow"
	case p.enforcedByItself(policy):
		mode = "own"
	}
	err := script.Run(ctx, p.client, []string{p.key}, "mode", field(policy, ""), mode, p.life.Milliseconds(), p.most).Err()
	if err != nil && strings.Contains(err.Error(), "overrides full") {
		return fmt.Errorf("%w: %d overrides are set, the most a namespace holds: delete one first", ErrInvalid, p.most)
	}
	if err != nil {
		return fmt.Errorf("admin: setting the shadow of %s: %w", policy, aclHint(err))
	}
	return p.sync(ctx)
}

// enforcedByItself reports whether the Limiters given the Plane configure
// policy, and none of them as a shadow limit: enforcing it is then its
// own, which an override need not say.
func (p *Plane) enforcedByItself(policy string) bool {
	known := false
	for _, l := range p.attached() {
		for _, c := range l.Policies() {
			if c.Name == policy {
				if c.Shadow {
					return false
				}
				known = true
			}
		}
	}
	return known
}

// Delete removes the override of policy and key, if any, for every
// instance, then reads the overrides.
func (p *Plane) Delete(ctx context.Context, policy, key string) error {
	if policy == "" {
		return fmt.Errorf("%w: Delete: the policy is empty", ErrInvalid)
	}
	if err := script.Run(ctx, p.client, []string{p.key}, "del", field(policy, key), p.life.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("admin: deleting an override of %s: %w", policy, aclHint(err))
	}
	return p.sync(ctx)
}

// sync reads the overrides when their version is not the one read last:
// one script run, which carries them all when it moved. On an error the
// table read last stays.
func (p *Plane) sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	reply, err := script.Run(ctx, p.client, []string{p.key}, "read", p.version, p.life.Milliseconds()).StringSlice()
	if err != nil {
		return fmt.Errorf("admin: reading the overrides: %w", aclHint(err))
	}
	if len(reply) == 0 || len(reply)%2 != 1 {
		return errors.New("admin: reading the overrides: a reply of the wrong shape")
	}
	if reply[0] == p.version {
		return nil
	}
	list := make([]override.Override, 0, len(reply)/2)
	for i := 1; i < len(reply); i += 2 {
		o, err := parse(reply[i], reply[i+1])
		if err != nil {
			return err
		}
		list = append(list, o)
	}
	t, err := override.NewTable(list)
	if err != nil {
		return fmt.Errorf("admin: the overrides in Redis: %w", err)
	}
	p.table.Store(t)
	p.version = reply[0]
	return nil
}

// stored is an override's value in Redis.
type stored struct {
	Quota    int   `json:"quota"`
	WindowMS int64 `json:"window_ms,omitempty"`
	Shadow   bool  `json:"shadow,omitempty"`
	Enforce  bool  `json:"enforce,omitempty"`
}

// field is the hash field of policy and key: a limit's name has no
// newline, so the first one ends it.
func field(policy, key string) string { return policy + "\n" + key }

// parse returns the override of a hash field and its value.
func parse(f, value string) (override.Override, error) {
	policy, key, ok := strings.Cut(f, "\n")
	var v stored
	if !ok || json.Unmarshal([]byte(value), &v) != nil {
		// Not the field itself: its key may be a client's.
		return override.Override{}, fmt.Errorf("admin: the overrides in Redis hold a field of %d bytes that is not an override", len(f))
	}
	return override.Override{Policy: policy, Key: key, Quota: v.Quota, Window: time.Duration(v.WindowMS) * time.Millisecond, Shadow: v.Shadow, Enforce: v.Enforce}, nil
}
