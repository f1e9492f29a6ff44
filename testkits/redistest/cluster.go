package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/clusterslot"
)

// Node timeouts: how long a cluster node may stay silent before its peers
// suspect it. A cluster without replicas never fails over, so it gets the
// longer one, which a loaded machine is less likely to trip by mistake.
const (
	clusterNodeTimeout         = 2000 * time.Millisecond
	clusterFailoverNodeTimeout = 1000 * time.Millisecond
)

// Cluster is a Redis Cluster started for a test. Its fields record the
// cluster as it formed; a failover changes which nodes are masters, and
// [Cluster.MasterFor] asks the cluster who owns a key now. Its methods are
// safe for concurrent use.
type Cluster struct {
	// Masters are the nodes that took the hash slots when the cluster
	// formed: Masters[i] took the i-th of len(Masters) equal slot ranges.
	Masters []*Server
	// Replicas[i] are the nodes that joined as replicas of Masters[i];
	// empty for a cluster from [RequireCluster].
	Replicas [][]*Server
}

// RequireCluster starts a cluster of n masters on loopback, the hash slots
// split evenly among them, and waits until every node reports
// cluster_state:ok. It skips or fails t as [Require] does, and stops the
// cluster when t ends.
func RequireCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return requireCluster(t, n, 0, clusterNodeTimeout)
}

// RequireClusterWithReplicas starts a cluster of masters, the hash slots
// split evenly among them, each with replicasPerMaster replicas, and waits
// until every node reports cluster_state:ok, every node sees every replica
// attached to its master, and every replica is in sync
// (master_link_status:up). The node timeout is 1s, so that a killed
// master is replaced within a few seconds; see [Cluster.WaitFailover].
// Replicas never migrate to another master. It skips or fails t as
// [Require] does, and stops the cluster when t ends.
func RequireClusterWithReplicas(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	return requireCluster(t, masters, replicasPerMaster, clusterFailoverNodeTimeout)
}

func requireCluster(t testing.TB, masters, replicasPerMaster int, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	c := started(t, func() (*Cluster, error) { return startCluster(masters, replicasPerMaster, nodeTimeout) })
	t.Cleanup(c.Close)
	return c
}

// SharedCluster returns a cluster of three masters, as [RequireCluster]
// starts, shared by all tests of the package: started on first use and
// stopped by [Main]. A cluster takes seconds to form (a master serves only
// 2s after it started), which tests that share one pay once. Tests
// sharing it must not run at the same time as each other, must use
// distinct keys, and must leave it serving with its configuration
// unchanged; flushing its scripts or functions is fine.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	return once(t, &sharedClusterMu, &sharedCluster, func() (*Cluster, error) { return startCluster(3, 0, clusterNodeTimeout) })
}

var (
	sharedClusterMu sync.Mutex
	sharedCluster   *Cluster
)

// StartCluster starts a cluster of n masters on loopback, without
// replicas, as [RequireCluster] does, for a program that is not a test
// (the benchmark). Close stops it.
func StartCluster(n int) (*Cluster, error) {
	return startCluster(n, 0, clusterNodeTimeout)
}

func startCluster(masters, replicasPerMaster int, nodeTimeout time.Duration) (*Cluster, error) {
	if masters < 1 || replicasPerMaster < 0 {
		return nil, fmt.Errorf("a cluster of %d masters with %d replicas each: want at least one master and no negative count", masters, replicasPerMaster)
	}
	c := &Cluster{Replicas: make([][]*Server, masters)}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	for range masters {
		s, err := startClusterNode(nodeTimeout)
		if err != nil {
			return fail(err)
		}
		c.Masters = append(c.Masters, s)
	}
	for i := range c.Replicas {
		for range replicasPerMaster {
			s, err := startClusterNode(nodeTimeout)
			if err != nil {
				return fail(err)
			}
			c.Replicas[i] = append(c.Replicas[i], s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx); err != nil {
		return fail(fmt.Errorf("forming the cluster: %w", err))
	}
	return c, nil
}

// Close kills every node of the cluster and removes their directories.
func (c *Cluster) Close() {
	for _, s := range c.nodes() {
		s.Close()
	}
}

// startClusterNode starts a cluster-enabled server on a port whose cluster
// bus port (port+10000) is free too.
func startClusterNode(nodeTimeout time.Duration) (*Server, error) {
	args := []string{
		"--cluster-enabled", "yes",
		"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		"--cluster-config-file", "nodes.conf",
		// A replica may take over however stale its data, so that a
		// failover never waits on replication lag.
		"--cluster-replica-validity-factor", "0",
		// Replicas stay with the master they joined, so that
		// [Cluster.WaitFailover] knows whom to expect.
		"--cluster-allow-replica-migration", "no",
		// A replica's full sync starts at once instead of after 5s.
		"--repl-diskless-sync-delay", "0",
	}
	mu.Lock()
	defer mu.Unlock()
	var lastErr error
	for range 20 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		s, err := startOn(port, args, "")
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no free port pair for a cluster node: %v", lastErr)
}

// Addrs returns the addresses of every node, masters first, in the order
// of [Cluster.Masters] and [Cluster.Replicas]: seeds for a
// redis.ClusterClient. For a cluster from [RequireCluster] they are the
// masters'.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, s := range c.nodes() {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

// MasterFor returns the node that owns key's hash slot now, as the first
// running node that answers CLUSTER SLOTS says. Between a master's death
// and the end of its failover that is still the dead master.
func (c *Cluster) MasterFor(ctx context.Context, key string) (*Server, error) {
	slot := clusterslot.Of(key)
	lastErr := errors.New("no node is running")
	for _, s := range c.nodes() {
		if !s.running() {
			continue
		}
		owner, err := slotOwner(ctx, s.Addr, slot)
		if err != nil {
			lastErr = err
			continue
		}
		if n := c.node(owner); n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("redistest: %s says slot %d of key %q is on %s, not a node of this cluster", s.Addr, slot, key, owner)
	}
	return nil, fmt.Errorf("redistest: finding the master of key %q: %w", key, lastErr)
}

// WaitFailover waits, until ctx ends, for another node of old's shard (a
// replica of old as the cluster formed, or its master if old was promoted
// since) to take over old's slots: it must report role master, and every
// running node other than old must report cluster_state:ok and name it as
// the owner of those slots. It returns the new master. Call it after
// killing or pausing old; a paused node other than old keeps it waiting.
// Other replicas of the shard may still be syncing with the new master.
func (c *Cluster) WaitFailover(ctx context.Context, old *Server) (*Server, error) {
	shard := c.shardOf(old)
	if shard < 0 {
		return nil, fmt.Errorf("redistest: WaitFailover: %s is not a node of this cluster", old.Addr)
	}
	var candidates []*Server
	for _, s := range c.shard(shard) {
		if s != old {
			candidates = append(candidates, s)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("redistest: WaitFailover: %s has no replica to take over", old.Addr)
	}
	slot, _ := c.slotRange(shard)
	var promoted *Server
	err := poll(ctx, "waiting for a replica to take over from "+old.Addr, func(ctx context.Context) error {
		promoted = nil
		for _, s := range candidates {
			if !s.running() {
				continue
			}
			r, err := role(ctx, s.Addr)
			if err != nil {
				return err
			}
			if r == "master" {
				promoted = s
				break
			}
		}
		if promoted == nil {
			return errors.New("no replica reports role master")
		}
		for _, s := range c.nodes() {
			if s == old || !s.running() {
				continue
			}
			state, err := infoField(ctx, s.Addr, "cluster-info", "cluster_state")
			if err != nil {
				return err
			}
			if state != "ok" {
				return fmt.Errorf("%s reports cluster_state:%s", s.Addr, state)
			}
			owner, err := slotOwner(ctx, s.Addr, slot)
			if err != nil {
				return err
			}
			if owner != promoted.Addr {
				return fmt.Errorf("%s says slot %d is on %s, not on the new master %s", s.Addr, slot, owner, promoted.Addr)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return promoted, nil
}

// nodes returns the masters, then the replicas, as the cluster formed.
func (c *Cluster) nodes() []*Server {
	nodes := append([]*Server(nil), c.Masters...)
	for _, rs := range c.Replicas {
		nodes = append(nodes, rs...)
	}
	return nodes
}

// shard returns Masters[i] and its replicas, as the cluster formed.
func (c *Cluster) shard(i int) []*Server {
	return append([]*Server{c.Masters[i]}, c.Replicas[i]...)
}

// shardOf returns the i for which s is in c.shard(i), or -1.
func (c *Cluster) shardOf(s *Server) int {
	for i := range c.Masters {
		for _, n := range c.shard(i) {
			if n == s {
				return i
			}
		}
	}
	return -1
}

// node returns the node listening on addr, or nil.
func (c *Cluster) node(addr string) *Server {
	for _, s := range c.nodes() {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// slotRange returns the first and last slot that Masters[i] took.
func (c *Cluster) slotRange(i int) (first, last int) {
	per := 16384 / len(c.Masters)
	first, last = i*per, (i+1)*per-1
	if i == len(c.Masters)-1 {
		last = 16383
	}
	return first, last
}

// slotOwner returns the address of the master that addr says owns slot.
func slotOwner(ctx context.Context, addr string, slot int) (string, error) {
	cl := redis.NewClient(probeOptions(addr))
	defer cl.Close()
	//lint:ignore SA1019 CLUSTER SLOTS answers on every Redis the library supports (5.0 and later).
	ranges, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("%s: CLUSTER SLOTS: %w", addr, err)
	}
	for _, r := range ranges {
		if int(r.Start) <= slot && slot <= int(r.End) && len(r.Nodes) > 0 {
			return r.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("%s: slot %d has no owner", addr, slot)
}

// form assigns the slots, joins the nodes, attaches the replicas and waits
// until the cluster is settled.
func (c *Cluster) form(ctx context.Context) error {
	for i, m := range c.Masters {
		first, last := c.slotRange(i)
		if err := do(ctx, m.Addr, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			return fmt.Errorf("ADDSLOTSRANGE on %s: %w", m.Addr, err)
		}
	}
	nodes := c.nodes()
	for _, s := range nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if err := do(ctx, nodes[0].Addr, "CLUSTER", "MEET", host, port).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s: %w", s.Addr, err)
		}
	}
	ids := make(map[*Server]string, len(nodes))
	for _, s := range nodes {
		id, err := do(ctx, s.Addr, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", s.Addr, err)
		}
		ids[s] = id
	}
	for i, rs := range c.Replicas {
		for _, r := range rs {
			// The replica must have heard of its master through the
			// MEET gossip first.
			err := poll(ctx, "attaching replica "+r.Addr, func(ctx context.Context) error {
				return do(ctx, r.Addr, "CLUSTER", "REPLICATE", ids[c.Masters[i]]).Err()
			})
			if err != nil {
				return err
			}
		}
	}
	return poll(ctx, "waiting for the cluster to settle", func(ctx context.Context) error {
		return c.settled(ctx, ids)
	})
}

// settled reports, as an error, the first thing that keeps the newly
// formed cluster from being ready.
func (c *Cluster) settled(ctx context.Context, ids map[*Server]string) error {
	nodes := c.nodes()
	for _, s := range nodes {
		info, err := do(ctx, s.Addr, "CLUSTER", "INFO").Text()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(nodes))+"\r") {
			return fmt.Errorf("%s does not report cluster_state:ok with %d known nodes", s.Addr, len(nodes))
		}
		if len(ids) == len(c.Masters) {
			continue
		}
		view, err := do(ctx, s.Addr, "CLUSTER", "NODES").Text()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr, err)
		}
		// Each line: id addr flags master-id ...
		masterOf := make(map[string]string)
		for line := range strings.SplitSeq(strings.TrimSpace(view), "\n") {
			if f := strings.Fields(line); len(f) >= 4 && strings.Contains(f[2], "slave") {
				masterOf[f[0]] = f[3]
			}
		}
		for i, rs := range c.Replicas {
			for _, r := range rs {
				if masterOf[ids[r]] != ids[c.Masters[i]] {
					return fmt.Errorf("%s does not see %s as a replica of %s yet", s.Addr, r.Addr, c.Masters[i].Addr)
				}
			}
		}
	}
	for _, rs := range c.Replicas {
		for _, r := range rs {
			link, err := infoField(ctx, r.Addr, "replication", "master_link_status")
			if err != nil {
				return err
			}
			if link != "up" {
				return fmt.Errorf("replica %s reports master_link_status:%s", r.Addr, link)
			}
		}
	}
	return nil
}
