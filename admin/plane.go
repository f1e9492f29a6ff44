package admin

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/internal/wire"
	"github.com/ratelimit-go/ratelimit/store"
)

// An Override replaces, for some keys of one policy, the policy's quota,
// window or shadow, or makes the keys unlimited or blocked. The zero
// Override is not valid. Its fields are those of the handler's JSON, named
// by their tags; docs/overrides.md tells each. A listing's entry can be
// given back unchanged to [Plane.Set] or [Plane.Delete].
type Override = override.Override

// errInvalid, wrapping ratelimit.ErrInvalid, is wrapped by every error
// for an override that cannot be set, which names the field at fault.
var errInvalid = fmt.Errorf("%w: admin", ratelimit.ErrInvalid)

// Options configures [New]. The zero value means every default.
type Options struct {
	// Logger receives the Plane's warnings: Redis not answering its reads
	// (once as it starts failing, once as it answers again). Nil means
	// slog.Default().
	Logger *slog.Logger

	// Key turns the key a client sends for policy, such as an API key,
	// into the store's form, as the policy's key function does, for an
	// Override's Key. Nil: Key is taken in the store's form.
	Key func(policy, clientKey string) (string, error)

	// Who names who made a change through the handler, for its audit
	// event: for example the operator the application's authentication
	// found. Nil: the request's remote address.
	Who func(r *http.Request) string

	// Label names a key in the store's form for people, in the handler's
	// listings and page ("label"): for example the customer whose API
	// key hashes to it. Nil, or "": none.
	Label func(storedKey string) string

	// Token, when not empty, is what every request to the handler must
	// bear: as "Authorization: Bearer" from an API client, or by logging
	// in on the page (see docs/overrides.md). Empty: the handler serves
	// every request, behind the application's own authentication.
	Token string
}

// A Plane holds a namespace's overrides in Redis and, as read last, in
// process, where a Limiter given it (see ratelimit.WithOverrides) finds a
// decision's override with no call to Redis. Every instance's Plane reads
// them every 250ms, so a change applies everywhere within about that,
// whole: a decision sees the overrides before it or after it. See
// docs/overrides.md for what was measured, and for Redis failing.
//
// Build it with [New], and Close it when done; the zero Plane is not
// usable. A Plane is safe for concurrent use.
type Plane struct {
	namespace string
	keeper    override.Keeper
	life      time.Duration
	most      int
	logger    *slog.Logger

	mu      sync.Mutex // one read at a time
	version string     // of table; "" before the first read
	table   atomic.Pointer[override.Table]
	failing atomic.Bool // the last read failed, and it was logged

	limitersMu sync.Mutex
	limiters   []*attached // those given the Plane

	top topCounts // this instance's keys denied most

	sessions *sessions // of Options.Token; nil without
	changes  changes   // made through the handler, for its page
	bans     bans      // seen in force

	opts Options // Key, Who and Label

	stop context.CancelFunc
	done chan struct{}
}

const (
	// overridesLife is how long the overrides stay in Redis after the last
	// change or renewing read (once half of it has passed): as long as any
	// instance runs, and that long after.
	overridesLife = 30 * 24 * time.Hour
	syncEvery     = 250 * time.Millisecond // how often a Plane reads them
	readTimeout   = time.Second            // bounds each read
)

// New returns the Plane of namespace's overrides, kept in Redis through
// st (see store.Redis.Overrides), beside its counters and under its
// prefix. It reads them once before it returns (when Redis does not
// answer, it logs so and returns a Plane that has read none yet), then
// every 250ms until Close. Give it the namespace of the Limiters it
// serves, or one for several namespaces that then share overrides.
func New(st *store.Redis, namespace string, opts Options) (*Plane, error) {
	switch {
	case st == nil:
		return nil, fmt.Errorf("%w: New: the store is nil", errInvalid)
	case namespace == "" || len(namespace) > wire.MaxName || strings.ContainsAny(namespace, "{}"):
		return nil, fmt.Errorf("%w: New: namespace %q: want 1 to %d bytes, without '{' or '}', as the Limiter's", errInvalid, namespace, wire.MaxName)
	}
	p := &Plane{
		namespace: namespace,
		keeper:    st.Overrides(namespace),
		top:       newTopCounts(),
		opts:      opts,
		life:      overridesLife,
		most:      override.MaxOverrides,
		logger:    cmp.Or(opts.Logger, slog.Default()),
		done:      make(chan struct{}),
	}
	if opts.Token != "" {
		p.sessions = newSessions(opts.Token, p.logger)
	}
	ctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	p.read(ctx)
	go p.run(ctx)
	return p, nil
}

// Close stops the Plane's reads. A Limiter given it keeps the overrides read last.
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

// read syncs once, within readTimeout, and logs a change between failing and not.
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
		p.logger.Warn(msg, slog.String("error", err.Error()))
	case err == nil && p.failing.Swap(false):
		p.logger.Info("admin: reading the overrides again")
	}
}

// List returns the overrides this instance applies, by policy, then
// stored key, each with its Label, and whether it has read them from
// Redis yet.
func (p *Plane) List() ([]Override, bool) {
	t := p.table.Load()
	if t == nil {
		return nil, false
	}
	list := t.All()
	for i := range list {
		list[i].Label = p.labelOf(list[i].StoredKey)
	}
	return list, true
}

// Set stores o in place of the override of its policy and key, for
// every instance, then reads the overrides, so that this instance
// applies it at once. Before writing anything it refuses, with an error
// wrapping ratelimit.ErrInvalid that names the field, an override that
// cannot be set: docs/overrides.md lists why one cannot.
func (p *Plane) Set(ctx context.Context, o Override) error {
	if err := p.resolve(&o); err != nil {
		return err
	}
	if err := p.check(o); err != nil {
		return err
	}
	if err := p.change(ctx, "set", o.Policy, o.StoredKey, o.Stored()); err != nil {
		return fmt.Errorf("admin: setting an override of %s: %w", o.Policy, err)
	}
	return p.sync(ctx)
}

// change runs op on the field of policy and key, with value.
func (p *Plane) change(ctx context.Context, op, policy, key, value string) error {
	err := p.keeper.Change(ctx, op, policy+"\n"+key, value, p.life, p.most)
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), override.FullReply):
		return fmt.Errorf("%w: %d overrides are set, the most a namespace holds: delete one first", errInvalid, p.most)
	case strings.Contains(err.Error(), "override unlimited or blocked"):
		return fmt.Errorf("%w: the policy %s is unlimited or blocked for every key: change or delete that override first", errInvalid, policy)
	}
	return err
}

// resolve checks o, and sets its StoredKey to what Options.Key makes of
// its Key. It refuses, naming the fix, a stored key or a prefix given as
// Key, and a StoredKey the key function could not make (see keyShape).
func (p *Plane) resolve(o *Override) error {
	if o.Key != "" && o.StoredKey != "" {
		return fmt.Errorf("%w: Key and StoredKey are both set: give one", errInvalid)
	}
	tag, size := p.keyShape(o.Policy)
	switch k := o.StoredKey; {
	case k != "" && tag != "":
		prefix := strings.HasSuffix(k, "*")
		if !strings.HasPrefix(k, tag) && !(prefix && strings.HasPrefix(tag, strings.TrimSuffix(k, "*"))) || !prefix && size > 0 && len(k) != size {
			return fmt.Errorf("%w: StoredKey %q is no key the key function of %s makes (they start %q): give the key as the client sends it, as Key, or a StoredKey from a listing", errInvalid, k, o.Policy, tag)
		}
	case o.Key == "" || p.opts.Key == nil:
		o.StoredKey, o.Key = cmp.Or(o.StoredKey, o.Key), ""
	case tag != "" && strings.HasPrefix(o.Key, tag):
		return fmt.Errorf("%w: Key %q is in the store's form, as listings give it: give it as StoredKey", errInvalid, o.Key)
	case strings.HasSuffix(o.Key, "*"):
		return fmt.Errorf("%w: Key %q is a prefix: give it in the store's form, as StoredKey", errInvalid, o.Key)
	default:
		k, err := p.opts.Key(o.Policy, o.Key)
		if err != nil {
			return fmt.Errorf("%w: Key: %v", errInvalid, err)
		}
		o.StoredKey, o.Key = k, ""
	}
	if err := o.Check(); err != nil {
		return invalid(err)
	}
	return nil
}

// keyShape returns what every stored key of policy starts with, and
// their length when it is fixed (a hash), as Options.Key makes them of
// two keys a client could send: the part both share, up to its last
// ':' ("ip:", "header:X-Api-Key:"). It returns "" without Options.Key,
// or when it takes neither key.
func (p *Plane) keyShape(policy string) (tag string, size int) {
	if p.opts.Key == nil {
		return "", 0
	}
	a, errA := p.opts.Key(policy, "192.0.2.1")
	b, errB := p.opts.Key(policy, "203.0.113.9")
	if errA != nil || errB != nil {
		return "", 0
	}
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if len(a) == len(b) {
		size = len(a)
	}
	return a[:strings.LastIndexByte(a[:n], ':')+1], size
}

// invalid returns err, of override.ErrInvalid, as an error of errInvalid.
func invalid(err error) error {
	return fmt.Errorf("%w: %s", errInvalid, strings.TrimPrefix(err.Error(), override.ErrInvalid.Error()+": "))
}

// check runs the Limiters' checks of o.
func (p *Plane) check(o Override) error {
	limiters := p.attached()
	known := len(limiters) == 0
	for _, l := range limiters {
		ok, err := l.Check(o)
		if err != nil {
			return invalid(err)
		}
		known = known || ok
	}
	if !known {
		return fmt.Errorf("%w: Policy %q is the name of no limit of the Limiters given this Plane (of the limits of WithLimitsFunc, those of the sets it returned so far)", errInvalid, o.Policy)
	}
	return nil
}

// SetShadow puts policy, for every key, in shadow (see ratelimit.Limit's
// Shadow) or, with shadow false, enforces it, for every instance, then
// reads the overrides. It checks policy as Set does, and changes only the
// shadow of its override for every key, in one step; a key's own Shadow
// or Enforced still wins (see docs/overrides.md). Enforcing a policy
// shadow by itself on no Limiter leaves nothing of shadow in the override.
func (p *Plane) SetShadow(ctx context.Context, policy string, shadow bool) error {
	o := Override{Policy: policy, Shadow: shadow, Enforced: !shadow}
	if err := o.Check(); err != nil {
		return invalid(err)
	}
	if err := p.check(o); err != nil {
		return err
	}
	mode := "enforced"
	switch {
	case shadow:
		mode = "shadow"
	case p.enforcedByItself(policy):
		mode = "own"
	}
	if err := p.change(ctx, "mode", policy, "", mode); err != nil {
		return fmt.Errorf("admin: setting the shadow of %s: %w", policy, err)
	}
	return p.sync(ctx)
}

// enforcedByItself reports whether the Limiters given the Plane configure
// policy, none as a shadow limit: no override need say it is enforced.
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

// Delete removes the override of o's policy and key (StoredKey, or Key
// as Set takes it), if any, for every instance, then reads the
// overrides. It reports whether there was one. The rest of o is not
// read: an entry of a listing deletes its override.
func (p *Plane) Delete(ctx context.Context, o Override) (bool, error) {
	if o.Policy == "" {
		return false, fmt.Errorf("%w: Delete: Policy is empty: name the limit whose override to delete", errInvalid)
	}
	o = Override{Policy: o.Policy, StoredKey: o.StoredKey, Key: o.Key, Quota: 1}
	if err := p.resolve(&o); err != nil {
		return false, err
	}
	if err := p.sync(ctx); err != nil {
		return false, err
	}
	if _, ok := p.table.Load().Get(o.Policy, o.StoredKey); !ok {
		return false, nil
	}
	if err := p.change(ctx, "del", o.Policy, o.StoredKey, ""); err != nil {
		return false, fmt.Errorf("admin: deleting an override of %s: %w", o.Policy, err)
	}
	return true, p.sync(ctx)
}

// sync reads the overrides when their version moved; on an error the last table stays.
func (p *Plane) sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	version, fields, err := p.keeper.Read(ctx, p.version, p.life)
	if err != nil {
		return fmt.Errorf("admin: reading the overrides: %w", err)
	}
	if version == p.version {
		return nil
	}
	list := make([]Override, 0, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		policy, key, ok := strings.Cut(fields[i], "\n")
		o, err := override.Parse(policy, key, fields[i+1])
		if !ok || err != nil {
			// Not the field itself: its key may be a client's.
			return fmt.Errorf("admin: the overrides in Redis hold a field of %d bytes that is not an override", len(fields[i]))
		}
		list = append(list, o)
	}
	t, err := override.NewTable(list)
	if err != nil {
		return fmt.Errorf("admin: the overrides in Redis: %w", err)
	}
	p.table.Store(t)
	p.version = version
	return nil
}
