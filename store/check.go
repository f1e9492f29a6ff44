package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/ratelimit-go/ratelimit/internal/clusterslot"
)

// Check reports whether Redis can decide now, and if not, why: it runs
// every command the store's scripts call, in forms that change nothing,
// on every master of a Redis Cluster, and fails on an evicting
// maxmemory-policy where CONFIG GET is permitted. Call it at startup: an
// error matching [ErrMisconfigured] (errors.Is) says what to change, so
// exit; any other means Redis may decide later, behind a [Fallback]. The
// keys Check writes are under the store's prefix and expire within a
// minute. See docs/managed-redis.md#redis-users-permissions-and-the-startup-check.
func (s *Redis) Check(ctx context.Context) error {
	err := s.check(ctx)
	if err != nil && !errors.Is(err, ErrMisconfigured) {
		return fmt.Errorf("ratelimit: redis: Redis cannot decide now (%s), and may later: not a misconfiguration: %w", causeOf(err), err)
	}
	return err
}

// check is Check through a probe client (see probeClient): an
// unreachable Redis fails it at once with the dial's error.
func (s *Redis) check(ctx context.Context) error {
	c, end, err := probeClient(ctx, s.client)
	if err != nil {
		return withTLSHint(misconfigured(err, s.prefix, s.cluster), s.client)
	}
	defer end()
	if err := s.checkThrough(ctx, c); err != nil {
		return withTLSHint(err, s.client)
	}
	return evictionError(s.evictingServers(ctx, c))
}

// checkThrough is Check through c, the store's client or one made like it.
func (s *Redis) checkThrough(ctx context.Context, c RedisClient) error {
	if cluster, ok := c.(*redis.ClusterClient); ok {
		return s.checkCluster(ctx, cluster)
	}
	keys := make([]string, len(checkSlots))
	for i, slot := range checkSlots {
		keys[i] = redisKey(s.prefix, clusterslot.Tag(slot), ":check")
	}
	if err := s.diagnose(ctx, c, keys); err != nil {
		return err
	}
	return misconfigured(probeScript.Run(ctx, c, []string{redisKey(s.prefix, "probe", "")}).Err(), s.prefix, s.cluster)
}

// checkSlots spread a single server's check over the cluster's range, so
// that a cluster node refuses it whichever slots it serves. Its ":check"
// keys are never written.
var checkSlots = []int{0, 5461, 10923, 16383}

// diagnose returns what check.lua, run through c, refused, as misconfigurations.
func (s *Redis) diagnose(ctx context.Context, c RedisClient, keys []string) error {
	args := make([]any, len(storeCommands))
	for i, name := range storeCommands {
		args[i] = name
	}
	refused, err := checkScript.Eval(ctx, c, keys, args...).Text()
	if err != nil {
		return misconfigured(err, s.prefix, s.cluster)
	}
	if refused == "" {
		return nil
	}
	var denied, unknown []string
	var errs []error
	said := errors.New("check.lua: " + strings.ReplaceAll(refused, "\n", "; "))
	for _, line := range strings.Split(refused, "\n") {
		name, why, _ := strings.Cut(line, " ")
		switch why {
		case "denied":
			denied = append(denied, name)
		case "unknown":
			unknown = append(unknown, name)
		case "key":
			errs = append(errs, &misconfiguration{problem: "the ACL user may not use the store's keys", fix: "give it ~" + s.prefix + "*", err: said})
		}
	}
	if len(denied) > 0 {
		errs = append(errs, &misconfiguration{
			problem: "the ACL user may not run " + strings.Join(denied, ", "),
			fix:     "add +" + strings.Join(denied, " +") + " to its rule; the store needs the ACL rule " + ACLRule(s.prefix),
			err:     said,
		})
	}
	if len(unknown) > 0 {
		errs = append(errs, &misconfiguration{
			problem: "Redis has renamed or disabled " + strings.Join(unknown, ", "),
			fix:     "the store needs EVAL, EVALSHA and " + strings.Join(storeCommands, ", "),
			err:     said,
		})
	}
	return errors.Join(errs...)
}

// time returns Redis's clock in µs, read by the probe script through c.
func (s *Redis) time(ctx context.Context, c RedisClient) (int64, error) {
	t, err := probeScript.Run(ctx, c, []string{redisKey(s.prefix, "probe", "")}).StringSlice()
	if err != nil {
		return 0, err
	}
	if len(t) == 2 {
		sec, err1 := strconv.ParseInt(t[0], 10, 64)
		usec, err2 := strconv.ParseInt(t[1], 10, 64)
		if err1 == nil && err2 == nil {
			return sec*1_000_000 + usec, nil
		}
	}
	return 0, fmt.Errorf("ratelimit: redis: TIME answered %q", t)
}

func (s *Redis) checkCluster(ctx context.Context, cluster *redis.ClusterClient) error {
	owners, err := clusterOwners(ctx, cluster)
	if err != nil {
		return misconfigured(err, s.prefix, s.cluster)
	}
	for _, o := range owners {
		if err := routesTo(ctx, cluster, o); err != nil {
			return fmt.Errorf("slots %d-%d: %w", o.start, o.end, misconfigured(err, s.prefix, s.cluster))
		}
		tag := clusterslot.Tag(o.start)
		if err := s.diagnose(ctx, cluster, []string{redisKey(s.prefix, tag, ":check")}); err != nil {
			return err
		}
		if err := probeScript.Run(ctx, cluster, []string{redisKey(s.prefix, tag, "probe")}).Err(); err != nil {
			return fmt.Errorf("slots %d-%d: %w", o.start, o.end, misconfigured(err, s.prefix, s.cluster))
		}
	}
	return nil
}

// warmConns is as many connections as the batcher runs scripts at once.
const warmConns = defaultRuns

// probeClient returns a client made like c, with one connection, one
// dial and no retries, for one probe round, and a func that closes it; c
// itself and a no-op when c is not a single server's client: once such a
// client failed as many dials in a row as its pool holds, it dials once a
// second, so probing through it would leave decisions without a connection
// for up to a second once Redis answers (warm readies it). It dials first,
// with c's dialer, to return the dial's own error: go-redis would log each
// failed dial, and report the round's deadline, not its cause.
func probeClient(ctx context.Context, c RedisClient) (RedisClient, func(), error) {
	single, ok := c.(*redis.Client)
	if !ok {
		return c, func() {}, nil
	}
	o := *single.Options()
	dial := o.Dialer
	if dial == nil {
		dial = redis.NewDialer(&o)
	}
	conn, err := dial(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, nil, err
	}
	var taken atomic.Bool
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if taken.CompareAndSwap(false, true) {
			return conn, nil
		}
		return dial(ctx, network, addr)
	}
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = 1, 0, 1, 0
	o.MaxRetries = -1
	o.DialerRetries = 1
	// c's push processor holds c's maintenance notification handlers: a
	// client made with it fails to register its own, logged each round.
	o.PushNotificationProcessor = nil
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	p := redis.NewClient(&o)
	return p, func() {
		p.Close()
		if taken.CompareAndSwap(false, true) {
			conn.Close() // never lent to p
		}
	}, nil
}

// warm has a single server's client run the probe on warmConns
// connections at once, as decisions will run (loading the library if
// Redis lost it). On a Redis Cluster, it loads the library where missing.
func (s *Redis) warm(ctx context.Context) error {
	single, ok := s.client.(*redis.Client)
	if !ok {
		if _, cluster := s.client.(*redis.ClusterClient); cluster && s.fn.useFunctions() {
			if refused, err := s.fn.loadShared(ctx, s.client); !refused {
				return err
			}
		}
		return nil
	}
	conns := make([]*redis.Conn, warmConns)
	errs := make([]error, warmConns)
	var wg sync.WaitGroup
	for i := range conns {
		conns[i] = single.Conn()
		run := func() {
			errs[i] = s.fn.run(ctx, conns[i], programRun{program: probeProgram, keys: []string{redisKey(s.prefix, "probe", "")}}).Err()
		}
		if i == 0 {
			// The first alone: go-redis v9.22 sets up a client's first
			// connections with racing writes to the client's options.
			run()
			continue
		}
		wg.Go(run)
	}
	wg.Wait()
	for _, c := range conns {
		c.Close() // back to the pool, for the decisions
	}
	return errors.Join(errs...)
}
