package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters only, started for a test.
type Cluster struct {
	Masters []*Server
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Masters))
	for i, s := range c.Masters {
		addrs[i] = s.Addr
	}
	return addrs
}

// RequireCluster starts a cluster of n masters on loopback, the hash slots
// split evenly among them, and waits until every node reports
// cluster_state:ok. It skips or fails t as [Require] does, and stops the
// cluster when t ends.
func RequireCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	skipUnlessInstalled(t)
	c := &Cluster{}
	for range n {
		s, err := startClusterNode()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		t.Cleanup(s.Kill)
		c.Masters = append(c.Masters, s)
	}
	if err := c.form(); err != nil {
		t.Fatalf("redistest: forming the cluster: %v", err)
	}
	return c
}

// startClusterNode starts a cluster-enabled server on a port whose cluster
// bus port (port+10000) is free too.
func startClusterNode() (*Server, error) {
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
		s, err := startOn(port, []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--cluster-config-file", "nodes.conf"})
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no free port pair for a cluster node: %v", lastErr)
}

// form assigns the slots, joins the nodes and waits for cluster_state:ok.
func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(c.Masters))
	for i, s := range c.Masters {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr})
		defer clients[i].Close()
	}
	per := 16384 / len(c.Masters)
	for i, cl := range clients {
		first, last := i*per, (i+1)*per-1
		if i == len(clients)-1 {
			last = 16383
		}
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			return fmt.Errorf("ADDSLOTSRANGE on %s: %w", c.Masters[i].Addr, err)
		}
	}
	for _, s := range c.Masters[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s: %w", s.Addr, err)
		}
	}
	for {
		ok := true
		for _, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(clients))) {
				ok = false
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster did not reach cluster_state:ok: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
