package store

import (
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
	"github.com/ratelimit-go/ratelimit/lua"
)

// RedisClient is the part of a go-redis v9 client that [Redis] uses.
// *redis.Client, *redis.ClusterClient, *redis.Ring, the failover clients
// of redis.NewFailoverClient and redis.NewFailoverClusterClient, and
// *redis.AutoPipeliner all satisfy it.
type RedisClient interface {
	redis.Scripter
	Del(ctx context.Context, keys ...string) *redis.IntCmd
	Ping(ctx context.Context) *redis.StatusCmd
}

// DefaultPrefix starts every key [Redis] writes unless [WithPrefix] says
// otherwise.
const DefaultPrefix = "rl:"

// Redis is a [ratelimit.Store] that keeps its counters in Redis, so that
// every instance of a service shares them. Each decision is one atomic
// script run (EVALSHA, falling back to EVAL when Redis lacks the script),
// whatever the number and mix of limits, and the script reads the time
// from Redis, so app servers with skewed clocks share one timeline.
//
// A key k with a limit is stored at prefix + "{k}" + a suffix naming the
// limit's algorithm and window. The braces are a hash tag: all of a
// decision's keys sit in one Redis Cluster slot. Every write sets a TTL
// that ends when the state is no longer needed. Redis 5.0 or later is
// needed (the tests run on 7.0).
//
// Redis is safe for concurrent use.
type Redis struct {
	client RedisClient
	prefix string
	// single[a] decides a request with one limit of algorithm a; all
	// decides any mix.
	single  [4]*redis.Script
	all     *redis.Script
	probe   *redis.Script // see Check
	checker *redis.Script // see Check
	charge  *redis.Script // see chargeBacklog
	limits  limitCache
	denied  *denyCache // nil when off
	batch   *batcher   // nil when decisions run one by one
	logger  *slog.Logger
	// cluster is set when the client follows MOVED and ASK replies.
	cluster bool
}

var (
	_ ratelimit.Store    = (*Redis)(nil)
	_ ratelimit.Resetter = (*Redis)(nil)
)

// RedisOption configures [NewRedis].
type RedisOption func(*Redis) error

// WithPrefix sets the prefix of every key the store writes; the default
// is [DefaultPrefix]. Give each application sharing a Redis its own. It
// may not contain '{' or '}', which would change the hash tag.
func WithPrefix(prefix string) RedisOption {
	return func(s *Redis) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: store.WithPrefix(%q): the prefix may not contain '{' or '}'", ratelimit.ErrInvalid, prefix)
		}
		s.prefix = prefix
		return nil
	}
}

// DefaultDenyCacheSize is how many denials [Redis] remembers unless
// [WithDenyCache] says otherwise.
const DefaultDenyCacheSize = 10_000

// WithDenyCache sets how many denied requests the store remembers in
// process; 0 turns the cache off. It is on by default, with
// [DefaultDenyCacheSize] entries.
//
// A request Redis denied is then denied in process, with no call to Redis,
// until its RetryAfter has passed, if it comes again with the same key,
// limits and cost, and no request of the key has passed meanwhile. Since a denial takes nothing and only
// time frees room, Redis would give the same answer, with three
// differences: the wait can end up to one round trip later than Redis's
// clock says; Remaining is the one Redis gave with the denial; and what
// other instances do does not reach this cache: a Reset made through
// another instance, or requests another instance let pass (which only
// make the retry later), so this instance keeps answering from the cache
// until the RetryAfter it was given. In
// exchange, a client hammering a limit it has spent costs Redis nothing.
func WithDenyCache(size int) RedisOption {
	return func(s *Redis) error {
		if size < 0 {
			return fmt.Errorf("%w: store.WithDenyCache(%d): must be 0 or more", ratelimit.ErrInvalid, size)
		}
		s.denied = nil
		if size > 0 {
			s.denied = newDenyCache(size)
		}
		return nil
	}
}

// NewRedis returns a store that keeps its counters in Redis through
// client. It asks Redis once for its maxmemory-policy, waiting up to a
// second, and logs a warning if Redis may evict keys (anything but
// noeviction): evicted counters would silently start afresh. It says
// nothing when CONFIG GET is not permitted or Redis does not answer.
func NewRedis(client RedisClient, opts ...RedisOption) (*Redis, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: store.NewRedis: client is nil", ratelimit.ErrInvalid)
	}
	s := &Redis{
		client:  client,
		prefix:  DefaultPrefix,
		all:     redis.NewScript(lua.Script(lua.FixedWindow, lua.SlidingLog, lua.SlidingWindow, lua.TokenBucket)),
		probe:   redis.NewScript(lua.Probe),
		checker: redis.NewScript(lua.Check),
		charge:  redis.NewScript(lua.Charge()),
		denied:  newDenyCache(DefaultDenyCacheSize),
		logger:  slog.Default(),
	}
	s.single[ratelimit.FixedWindow] = redis.NewScript(lua.Script(lua.FixedWindow))
	s.single[ratelimit.SlidingLog] = redis.NewScript(lua.Script(lua.SlidingLog))
	s.single[ratelimit.SlidingWindow] = redis.NewScript(lua.Script(lua.SlidingWindow))
	s.single[ratelimit.TokenBucket] = redis.NewScript(lua.Script(lua.TokenBucket))
	_, s.cluster = client.(*redis.ClusterClient)
	if _, single := client.(*redis.Client); single {
		s.batch = &batcher{client: client, all: s.all, maxRuns: defaultRuns, maxBatch: DefaultMaxBatch}
	}
	for _, opt := range opts {
		if err := opt(s); err != nil {
			return nil, err
		}
	}
	s.checkEviction()
	return s, nil
}

// DefaultMaxBatch is the most decisions [Redis] sends in one script run
// unless [WithMaxBatch] says otherwise.
const DefaultMaxBatch = 128

// defaultRuns is how many script runs a batching store keeps under way.
const defaultRuns = 4

// WithMaxBatch sets the most decisions sent together in one script run;
// 1 sends each on its own. The default is [DefaultMaxBatch].
//
// A request that arrives while fewer than four script runs are under way
// is sent at once, alone. When more arrive, they wait for a run to end and
// then go together in one: one command for the client to send and one
// script for Redis to run, each request still decided atomically and all
// or nothing, as if sent alone. Batching applies to a single Redis server
// (a *redis.Client, which the Sentinel failover client is too); with a
// ClusterClient, Ring or AutoPipeliner the keys of different requests may
// live on different servers, and each request is sent alone.
func WithMaxBatch(n int) RedisOption {
	return func(s *Redis) error {
		if n < 1 {
			return fmt.Errorf("%w: store.WithMaxBatch(%d): must be at least 1", ratelimit.ErrInvalid, n)
		}
		if s.batch != nil {
			s.batch.maxBatch = n
			if n == 1 {
				s.batch = nil
			}
		}
		return nil
	}
}

// Allow implements [ratelimit.Store].
func (s *Redis) Allow(ctx context.Context, key string, cost int, limits ...ratelimit.Limit) (ratelimit.Decision, error) {
	var cbuf [4]*compiled
	cs, err := s.limits.check(key, cost, limits, cbuf[:0])
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return s.decide(ctx, key, cost, limits, cs, 0, time.Time{})
}

// errLate is the answer to a request that reached Redis after its
// deadline: Redis did not decide it.
var errLate = errors.New("the request reached Redis after its deadline")

// decide is Allow for checked input, cs being the limits compiled. When
// deadline is not 0, Redis decides nothing once its clock (in
// microseconds) is past it, and the error is errLate. When until is not
// zero, the caller waits no later than until (or about that, see batcher),
// as if ctx ended then, without the cost of a context of its own.
func (s *Redis) decide(ctx context.Context, key string, cost int, limits []ratelimit.Limit, cs []*compiled, deadline int64, until time.Time) (ratelimit.Decision, error) {
	var epoch uint64
	if s.denied != nil {
		if d, ok := s.denied.get(key, cs, cost); ok {
			for i := range d.Results {
				d.Results[i].Limit = limits[i]
			}
			return d, nil
		}
		epoch = s.denied.epoch(key)
	}
	call := newDecision()
	call.script = s.all
	if len(limits) == 1 {
		call.script = s.single[limits[0].Algorithm]
	}
	call.deadline = deadline // sent by reference: boxing it would allocate
	call.args = append(call.args, len(limits), cost, &call.deadline)
	for _, p := range cs {
		call.keys = append(call.keys, s.prefix+"{"+key+"}"+p.suffix)
		call.args = append(call.args, p.args[:]...)
	}
	call.until = until
	if dl, ok := ctx.Deadline(); ok && (until.IsZero() || dl.Before(until)) {
		call.until = dl
	}
	if s.batch != nil {
		if err := s.batch.do(ctx, call); err != nil {
			return ratelimit.Decision{}, fmt.Errorf("ratelimit: redis: deciding %s: %w", keyRef(key, limits), misconfigured(err, s.prefix, s.cluster))
		}
	} else {
		call.run(ctx, s.client)
	}
	line, err := call.line, call.err
	call.release()
	if err == nil && strings.HasPrefix(line, "E ") {
		err = scriptError(line[2:])
	}
	if err == nil && line == "X" {
		err = errLate
	}
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: redis: deciding %s: %w", keyRef(key, limits), misconfigured(err, s.prefix, s.cluster))
	}
	d := ratelimit.Decision{Allowed: true, Results: make([]ratelimit.Result, len(limits))}
	for i, l := range limits {
		var n [4]int64
		if line, err = parseInts(line, n[:]); err != nil {
			return ratelimit.Decision{}, fmt.Errorf("ratelimit: redis: deciding %s: %w", keyRef(key, limits), err)
		}
		d.Results[i] = ratelimit.Result{
			Limit:      l,
			Allowed:    n[0] == 1,
			Remaining:  int(n[1]),
			ResetAfter: time.Duration(n[2]) * time.Microsecond,
			RetryAfter: time.Duration(n[3]) * time.Microsecond,
		}
		d.Allowed = d.Allowed && n[0] == 1
	}
	if line != "" {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: redis: deciding %s: unexpected %q at the end of the reply", keyRef(key, limits), line)
	}
	if s.denied != nil {
		if d.Allowed {
			s.denied.forget(key) // its room changed: cached retry times may be stale
		} else {
			s.denied.put(key, cs, cost, d, epoch)
		}
	}
	return d, nil
}

// keyRef names key in errors without showing it, since a key may hold an
// API key or a token: by the policies it was decided under and the first
// 8 hex digits of its SHA-256, enough to tell keys apart in logs and to
// match one whose value is known (sha256sum of the key as the store sees
// it), too few to recover it.
func keyRef(key string, limits []ratelimit.Limit) string {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	b.WriteString("key #")
	b.WriteString(hex.EncodeToString(sum[:4]))
	for i, l := range limits {
		if i == 0 {
			b.WriteString(" under ")
		} else {
			b.WriteString(", ")
		}
		if l.Name != "" {
			b.WriteString(strconv.Quote(l.Name))
		} else {
			b.WriteString(l.String())
		}
	}
	return b.String()
}

// scriptError is an error a script reported for one request (a key
// holding a foreign value, Redis refusing a write), in the form of Redis's
// error replies, so that errors.As finds it as a redis.Error.
type scriptError string

func (e scriptError) Error() string { return string(e) }

// RedisError marks scriptError as a reply of Redis's.
func (scriptError) RedisError() {}

// parseInts reads len(dst) space-separated integers from the start of s
// and returns the rest.
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

// Reset implements [ratelimit.Resetter]: it deletes key's state for limits.
func (s *Redis) Reset(ctx context.Context, key string, limits ...ratelimit.Limit) error {
	// A cost of 1 fits every valid limit, so this checks key and limits.
	if err := ratelimit.CheckRequest(key, 1, limits); err != nil {
		return err
	}
	keys := make([]string, len(limits))
	for i, l := range limits {
		keys[i] = s.prefix + "{" + key + "}" + s.limits.get(l).suffix
	}
	err := s.client.Del(ctx, keys...).Err()
	if s.denied != nil {
		// After the DEL, whatever its outcome: a denial cached before it,
		// or by a request Redis decided before it, must not outlive it.
		s.denied.reset(key)
	}
	if err != nil {
		return fmt.Errorf("ratelimit: redis: resetting %s: %w", keyRef(key, limits), misconfigured(err, s.prefix, s.cluster))
	}
	return nil
}
