package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/internal/wire"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/store/internal/slots"
)

// RedisClient is the part of a go-redis v9 client that [Redis] uses: it
// runs scripts and nothing else. *redis.Client, *redis.ClusterClient,
// *redis.Ring, *redis.AutoPipeliner and the failover clients of
// redis.NewFailoverClient and redis.NewFailoverClusterClient satisfy it.
type RedisClient interface{ redis.Scripter }

// Redis is a [ratelimit.Store] that keeps its counters in Redis (5.0 or
// later), so that every instance of a service shares them. Each decision
// is one atomic run of Lua code, whatever the number and mix of limits,
// which reads the time from Redis, so app servers with skewed clocks
// share one timeline; it runs as Redis Functions where allowed, else as a
// script (see docs/managed-redis.md#redis-functions). A key k's state is
// stored at Prefix + "{k}" + a suffix: all of a decision's keys share one
// hash tag, and every write sets a TTL (see docs/keys.md).
//
// Build it with [NewRedis]; the zero Redis is not usable. Redis is safe
// for concurrent use.
type Redis struct {
	client RedisClient
	prefix string
	denied *denyCache // nil when off
	fn     *functions // functions or scripts
	// batch (a server's) or masters (a cluster's) batch decisions; nil: none.
	batch   *batcher
	masters *clusterBatcher
	logger  *slog.Logger
	cluster bool        // the client follows MOVED and ASK replies
	slots   slots.Table // the slots of Concurrent limits its requests hold
	holds   slots.Table // its requests' holds of limits charged from usage
	leased  sliceTable  // this instance's slices of leased limits
}

var _ ratelimit.Store = (*Redis)(nil)

// RedisOptions configures [NewRedis]. The zero value means every default.
type RedisOptions struct {
	// Prefix starts every key the store writes. Give each application
	// sharing a Redis its own. It may not contain '{' or '}', which would
	// change the hash tag. Empty means "rl:".
	Prefix string

	// DenyCacheSize is how many denials the store remembers, to deny a
	// repeat in process until its RetryAfter, blind meanwhile to a Reset
	// through another instance (see docs/performance.md#the-deny-cache).
	// Zero means 10,000; a negative size turns the cache off.
	DenyCacheSize int

	// MaxBatch is the most decisions sent together in one batch, each
	// still decided atomically, as if alone, with its own error (see
	// docs/performance.md#batching). Zero means 128; 1 sends each alone.
	MaxBatch int

	// Logger receives warnings (see [NewRedis]). Nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of RedisOptions.
const (
	defaultPrefix        = wire.DefaultPrefix
	defaultDenyCacheSize = 10_000
	defaultMaxBatch      = 128
	defaultRuns          = 4 // runs a batching store keeps under way on a single server
	// clusterRuns is the runs under way per master of a cluster: 2 keeps
	// a master's next batch forming while one is sent (1 and 4 were
	// measured, 4 spending the most Redis CPU per decision).
	clusterRuns = 2
)

// NewRedis returns a store that keeps its counters in Redis through
// client. It logs a warning when Redis's maxmemory-policy, asked once
// within a second, may evict them (see docs/managed-redis.md#eviction).
func NewRedis(client RedisClient, opts RedisOptions) (*Redis, error) {
	switch {
	case client == nil:
		return nil, fmt.Errorf("%w: store.NewRedis: client is nil", ratelimit.ErrInvalid)
	case strings.ContainsAny(opts.Prefix, "{}"):
		return nil, fmt.Errorf("%w: store.RedisOptions.Prefix %q: the prefix may not contain '{' or '}'", ratelimit.ErrInvalid, opts.Prefix)
	case opts.MaxBatch < 0:
		return nil, fmt.Errorf("%w: store.RedisOptions.MaxBatch %d: must be 0 (the default) or more", ratelimit.ErrInvalid, opts.MaxBatch)
	}
	s := &Redis{client: client, prefix: cmp.Or(opts.Prefix, defaultPrefix), logger: cmp.Or(opts.Logger, slog.Default())}
	s.fn = newFunctions(client, s.logger)
	s.slots.Renew = s.renewSlots
	s.holds.Renew = s.renewHolds
	if opts.DenyCacheSize >= 0 {
		s.denied = newDenyCache(cmp.Or(opts.DenyCacheSize, defaultDenyCacheSize))
	}
	_, s.cluster = client.(*redis.ClusterClient)
	if opts.MaxBatch != 1 {
		maxBatch := cmp.Or(opts.MaxBatch, defaultMaxBatch)
		switch c := client.(type) {
		case *redis.Client:
			s.batch = &batcher{client: client, fn: s.fn, maxRuns: defaultRuns, maxBatch: maxBatch}
		case *redis.ClusterClient:
			s.masters = &clusterBatcher{client: c, fn: s.fn, maxRuns: clusterRuns, maxBatch: maxBatch, masters: make(map[string]*batcher)}
		}
	}
	s.checkEviction()
	return s, nil
}

// Allow implements [ratelimit.Store].
func (s *Redis) Allow(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return s.decide(ctx, &request{key: key, cost: cost, limits: given, set: set})
}

// A request is a key's request, checked, and how long its caller waits.
type request struct {
	key      string
	cost     int
	limits   []ratelimit.Limit // as given
	set      *spec.Set         // limits compiled
	deadline int64             // when not 0, Redis's time (µs) past which it answers errLate
	// until, when not zero, is when the caller stops waiting (about then,
	// see batcher), as if ctx ended, without a context of its own.
	until time.Time
	ask   *sliceAsk // slices asked for and got; nil when it takes none
}

var errLate = errors.New("the request reached Redis after its deadline")

// decide is Allow for a checked request.
func (s *Redis) decide(ctx context.Context, r *request) (ratelimit.Decision, error) {
	if r.set.Leased {
		return s.decideLeased(ctx, r)
	}
	d, err := s.decideOnce(ctx, r)
	if err != nil && calendarMiss(err, r.set) {
		return s.decideOnce(ctx, r)
	}
	return d, err
}

// decideLeased is decide for a leased set: from this instance's slices
// when they suffice, else on Redis (see spend).
func (s *Redis) decideLeased(ctx context.Context, r *request) (ratelimit.Decision, error) {
	waited := false
	for {
		d, next, wait := s.leased.spend(r, waited)
		switch next {
		case fromSlices:
			return d, nil
		case noSlices:
			d, err := s.decideOnce(ctx, r)
			if err != nil && waited {
				err = afterWait(err)
			}
			return d, err
		case waitSlices:
			if err := waitForSlices(ctx, wait, r.until); err != nil {
				return ratelimit.Decision{}, fmt.Errorf("ratelimit: redis: deciding %s: %w", keyRef(r.key, r.limits), err)
			}
			waited = true
			continue
		}
		break // takeSlices
	}
	taking := *r
	taking.ask = &sliceAsk{wants: s.leased.wants(r.key, r.set, make([]int64, 0, len(r.set.Limits)))}
	sent := s.leased.now()
	d, err := s.decideOnce(ctx, &taking)
	if err != nil || len(taking.ask.extra) != len(r.set.Limits) { // failed, or denied from the deny cache
		s.leased.abandon(r.key, err == nil)
		if err != nil && waited {
			err = afterWait(err)
		}
		return d, err
	}
	s.leased.granted(&taking, &d, sent)
	return d, nil
}

// A sliceAsk is, per limit, what a request of a leased set asks of Redis
// beyond its cost, then what Redis granted: units and their life in µs.
type sliceAsk struct{ wants, extra, life []int64 }

// decideOnce is decide, without asking again on a calendar miss.
func (s *Redis) decideOnce(ctx context.Context, r *request) (ratelimit.Decision, error) {
	var epoch denyEpoch
	if s.denied != nil {
		if d, ok := s.denied.get(r); ok {
			return d, nil
		}
		epoch = s.denied.epoch(r.key)
	}
	var id int64 // the request's slot and holds
	var slot string
	if r.set.Holds(int64(r.cost)) {
		id = slots.NewID()
		slot = strconv.FormatInt(id, 10)
	}
	line, err := s.send(ctx, s.newCall(ctx, r, slot))
	d, err := s.parse("deciding", r, r.set.Ban != nil, line, err)
	if err != nil {
		return d, err
	}
	if id != 0 && d.Allowed {
		d.Slot = slot
		if r.set.Slot >= 0 {
			c := &r.set.Limits[r.set.Slot]
			s.slots.Hold(slots.Slot{ID: id, Key: redisKey(s.prefix, r.key, c.Suffix), Limit: c})
		}
		if r.set.Usage {
			s.holds.Hold(slots.Slot{ID: id, Key: strings.Clone(r.key), Set: r.set})
		}
	}
	switch {
	case s.denied == nil:
	case d.Allowed:
		s.denied.passed(r, d, epoch)
	case r.set.Slot < 0 || d.Results()[r.set.Slot].Allowed:
		// Not a Concurrent limit's denial: any instance's End frees a slot.
		s.denied.put(r, d, epoch)
	}
	return d, nil
}

// newCall returns the call of decide.lua for r, under slot (see decideArgs).
func (s *Redis) newCall(ctx context.Context, r *request, slot string) *decision {
	call := decisions.Get().(*decision)
	call.program = decideAny
	if len(r.set.Limits) == 1 {
		call.program = decideOne[r.set.Limits[0].Algorithm]
	}
	call.deadline = r.deadline
	call.keys = requestKeys(call.keys, s.prefix, r)
	call.args = decideArgs(call.args, r, &call.deadline, slot)
	call.until = r.until
	if dl, ok := ctx.Deadline(); ok && (r.until.IsZero() || dl.Before(r.until)) {
		call.until = dl
	}
	return call
}

// send has Redis decide call, alone or in a batch, and returns its reply
// line; call goes back to the pool once answered.
func (s *Redis) send(ctx context.Context, call *decision) (string, error) {
	var err error
	switch {
	case s.batch != nil:
		err = s.batch.do(ctx, call)
	case s.masters != nil:
		err = s.masters.do(ctx, call)
	default:
		call.run(ctx, s.fn, s.client)
	}
	if err != nil {
		return "", err // call may still be in a run
	}
	line, err := call.line, call.err
	call.release()
	switch {
	case err != nil:
		return "", err
	case strings.HasPrefix(line, "E "):
		return "", scriptError(line[2:])
	case line == "X":
		return "", errLate
	}
	return line, nil
}

func (s *Redis) banKey(key string) string { return redisKey(s.prefix, key, spec.BanSuffix) }

// parseDecision reads a script's reply line for a request under limits:
// per limit, allowed, remaining, then reset_after, retry_after and window
// in µs (and, with ask, the slice's units and life); then, when banned is
// set, the time until the key's ban ends.
func parseDecision(line string, limits []ratelimit.Limit, banned bool, ask *sliceAsk) (ratelimit.Decision, error) {
	var buf [limitset.MaxInline]ratelimit.Result
	rs := buf[:0]
	var n [7]int64 // n[5] and n[6] stay 0 without ask
	var err error
	for i := range len(limits) {
		if ask == nil {
			line, err = parseInts(line, n[:5])
		} else {
			line, err = parseInts(line, n[:])
			ask.extra, ask.life = append(ask.extra, n[5]), append(ask.life, n[6])
		}
		if err != nil {
			return ratelimit.Decision{}, err
		}
		rs = append(rs, ratelimit.Result{
			Limit:      limits[i],
			Allowed:    n[0] == 1,
			Remaining:  int(n[1]),
			Window:     time.Duration(n[4]) * time.Microsecond,
			ResetAfter: time.Duration(n[2]) * time.Microsecond,
			RetryAfter: time.Duration(n[3]) * time.Microsecond,
			Leased:     int(n[5]),
		})
	}
	d := ratelimit.MakeDecision(rs...)
	if banned {
		if line, err = parseInts(line, n[:1]); err != nil {
			return ratelimit.Decision{}, err
		}
		d.Banned = time.Duration(n[0]) * time.Microsecond
	}
	if line != "" {
		return ratelimit.Decision{}, fmt.Errorf("unexpected %q at the end of the reply", line)
	}
	return d, nil
}

// Peek implements [ratelimit.Store]: one run of code that only reads (it
// leaves even expired entries, and every key's TTL, as they are). The deny
// cache neither answers a Peek nor learns from one.
func (s *Redis) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return s.peek(ctx, &request{key: key, cost: cost, limits: given, set: set})
}

// peek is Peek for a checked request.
func (s *Redis) peek(ctx context.Context, r *request) (ratelimit.Decision, error) {
	keys := requestKeys(make([]string, 0, 2*len(r.set.Limits)+1), s.prefix, r)
	args := peekArgs(make([]any, 0, 1+4*len(r.set.Limits)), r)
	line, err := s.fn.run(ctx, s.client, programRun{peekProgram, keys, args}).Text()
	if err != nil && calendarMiss(err, r.set) {
		args = peekArgs(args[:0], r)
		line, err = s.fn.run(ctx, s.client, programRun{peekProgram, keys, args}).Text()
	}
	return s.parse("peeking", r, r.set.Ban != nil, line, err)
}

// End implements [ratelimit.Store]: one run of end.lua, which takes usage
// from key's limits charged from usage, whatever they have left, and
// answers for each limit as Peek would for a request of 1.
func (s *Redis) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, d ratelimit.Decision) (ratelimit.Decision, error) {
	given, set, err := limitset.CheckEnd(key, usage, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return s.end(ctx, &request{key: key, limits: given, set: set}, usage, d.Slot)
}

// end is End for a checked request, whose cost is not used: usage is
// charged, and slot, the id of the slot the request took, given back.
// Past r's deadline, if any, Redis charges nothing: the error is errLate.
func (s *Redis) end(ctx context.Context, r *request, usage int, slot string) (ratelimit.Decision, error) {
	given := "" // slot, when it is one of r's
	if id, err := strconv.ParseInt(slot, 10, 64); err == nil && (r.set.Slot >= 0 || r.set.Usage) {
		// Whatever the outcome: a slot or hold not given back lapses.
		s.slots.Drop(id)
		s.holds.Drop(id)
		given = slot
	}
	keys := endKeys(make([]string, 0, 2*len(r.set.Limits)+1), s.prefix, r)
	args := endArgs(make([]any, 0, 2+4*len(r.set.Limits)), r, usage, given)
	line, err := s.fn.run(ctx, s.client, programRun{endProgram, keys, args}).Text()
	if err != nil && calendarMiss(err, r.set) {
		args = endArgs(args[:0], r, usage, given)
		line, err = s.fn.run(ctx, s.client, programRun{endProgram, keys, args}).Text()
	}
	if err == nil && line == "X" {
		err = errLate
	}
	if s.denied != nil && (usage > 0 || slot != "") {
		s.denied.forget(r.key) // its room changed: a cached denial may be too short, or wrong
	}
	return s.parse("ending a request of", r, false, line, err)
}

// parse reads line, a program's reply for r, and wraps its error or err.
func (s *Redis) parse(doing string, r *request, banned bool, line string, err error) (ratelimit.Decision, error) {
	var d ratelimit.Decision
	if err != nil {
		err = misconfigured(err, s.prefix, s.cluster)
	} else {
		d, err = parseDecision(line, r.limits, banned, r.ask)
	}
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: redis: %s %s: %w", doing, keyRef(r.key, r.limits), err)
	}
	return d, nil
}

// renewSlots renews the slots held, one run of renew.lua per key.
func (s *Redis) renewSlots(held []slots.Slot) {
	byKey := make(map[string][]any)
	lengths := make(map[string]int64)
	for _, h := range held {
		byKey[h.Key] = append(byKey[h.Key], strconv.FormatInt(h.ID, 10))
		lengths[h.Key] = h.Limit.Window
	}
	for key, ids := range byKey {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(lengths[key])*time.Microsecond/3)
		s.fn.run(ctx, s.client, programRun{renewProgram, []string{key}, renewArgs(lengths[key], ids)})
		cancel()
	}
}

// renewHolds renews the holds of the requests in flight, one run each.
func (s *Redis) renewHolds(held []slots.Slot) {
	for _, h := range held {
		keys := holdsKeys(nil, s.prefix, h.Key, h.Set)
		ctx, cancel := context.WithTimeout(context.Background(), spec.HoldLife/3)
		s.fn.run(ctx, s.client, programRun{renewProgram, keys, renewArgs(0, []any{strconv.FormatInt(h.ID, 10)})})
		cancel()
	}
}

// keyRef names key in errors without showing it, since a key may hold a
// token: by its policies and the first 8 hex digits of its SHA-256, enough
// to tell keys apart and match a known one (sha256sum), too few to recover.
func keyRef(key string, limits []ratelimit.Limit) string {
	sum := sha256.Sum256([]byte(key))
	ref, sep := "key #"+hex.EncodeToString(sum[:4]), " under "
	for _, l := range limits {
		name := strconv.Quote(l.Name)
		if l.Name == "" {
			name = l.String()
		}
		ref, sep = ref+sep+name, ", "
	}
	return ref
}

// scriptError is an error a script reported for one request (a key
// holding a foreign value), a redis.Error for errors.As.
type scriptError string

func (e scriptError) Error() string { return string(e) }
func (scriptError) RedisError()     {}

// parseInts reads len(dst) space-separated integers off s; it returns the rest.
func parseInts(s string, dst []int64) (string, error) {
	for i := range dst {
		s = strings.TrimPrefix(s, " ")
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		n, err := strconv.ParseInt(s[:end], 10, 64)
		if err != nil {
			return s, fmt.Errorf("malformed reply: %w", err)
		}
		dst[i], s = n, s[end:]
	}
	return s, nil
}

// Reset implements [ratelimit.Store]: it deletes key's state for limits
// (reservations included), its requests lately settled, and its ban
// state, whether limits have a ban or not: every set with a ban shares it.
func (s *Redis) Reset(ctx context.Context, key string, limits *ratelimit.Limits) error {
	given, set, err := limitset.Check(key, 1, limits) // 1 fits every valid limit
	if err != nil {
		return err
	}
	keys := limitKeys(make([]string, 0, 2*len(set.Limits)+2), s.prefix, key, set)
	keys = holdsKeys(keys, s.prefix, key, set)
	keys = append(keys, s.banKey(key), redisKey(s.prefix, key, spec.EndedSuffix))
	s.leased.drop(key)
	err = s.fn.run(ctx, s.client, programRun{program: resetProgram, keys: keys}).Err()
	if s.denied != nil {
		s.denied.reset(key) // whatever the DEL's outcome: no older denial may outlive it
	}
	if err != nil {
		return fmt.Errorf("ratelimit: redis: resetting %s: %w", keyRef(key, given), misconfigured(err, s.prefix, s.cluster))
	}
	return nil
}
