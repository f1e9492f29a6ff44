package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a master, one replica and three Sentinels watching them,
// started for a test. Its fields record the setup as it started; after a
// failover, [Sentinel.MasterAddr] says which server is master. Its methods
// are safe for concurrent use.
type Sentinel struct {
	// MasterName is the name the Sentinels monitor the master under, for
	// redis.FailoverOptions.MasterName.
	MasterName string
	// Master is the server that started as master.
	Master *Server
	// Replica is the server that started as its replica.
	Replica *Server
	// Sentinels are the three Sentinel processes.
	Sentinels []*Server
}

// The Sentinels' settings: a quorum of two of the three agrees that the
// master is down after 1s of silence; a failover that stalls is retried
// after twice the failover timeout.
const (
	sentinelQuorum          = 2
	sentinelDownAfter       = 1000 * time.Millisecond
	sentinelFailoverTimeout = 3000 * time.Millisecond
)

// RequireSentinel starts a master, a replica of it and three Sentinels
// monitoring it with a quorum of two, and waits until the replica is in
// sync and every Sentinel knows the replica and the other two Sentinels,
// so that a failover can start at once. A master that stops answering is
// replaced within a few seconds; see [Sentinel.WaitFailover]. It skips or
// fails t as [Require] does, and stops every process when t ends.
func RequireSentinel(t testing.TB) *Sentinel {
	t.Helper()
	skipUnlessInstalled(t)
	startServer := func(args []string, sentinelConf string) *Server {
		t.Helper()
		mu.Lock()
		s, err := start(args, sentinelConf)
		mu.Unlock()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		t.Cleanup(s.Kill)
		return s
	}
	s := &Sentinel{MasterName: "redistest"}
	// A replica's full sync starts at once instead of after 5s.
	s.Master = startServer([]string{"--repl-diskless-sync-delay", "0"}, "")
	host, port, _ := net.SplitHostPort(s.Master.Addr)
	s.Replica = startServer([]string{"--repl-diskless-sync-delay", "0", "--replicaof", host, port}, "")
	conf := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s %[4]d\n"+
		"sentinel down-after-milliseconds %[1]s %[5]d\n"+
		"sentinel failover-timeout %[1]s %[6]d\n",
		s.MasterName, host, port, sentinelQuorum, sentinelDownAfter.Milliseconds(), sentinelFailoverTimeout.Milliseconds())
	for range 3 {
		s.Sentinels = append(s.Sentinels, startServer(nil, conf))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := poll(ctx, "waiting for the Sentinels to see the replica and each other", s.ready); err != nil {
		t.Fatal(err)
	}
	return s
}

// SentinelAddrs returns the Sentinels' addresses, for
// redis.FailoverOptions.SentinelAddrs.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr
	}
	return addrs
}

// MasterAddr returns the address of the master as the first running
// Sentinel that answers names it. Between the master's death and the end
// of the failover that is still the dead master.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	lastErr := errors.New("no Sentinel is running")
	for _, sn := range s.Sentinels {
		if !sn.running() {
			continue
		}
		addr, err := s.masterAddrFrom(ctx, sn.Addr)
		if err == nil {
			return addr, nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("redistest: asking for the master of %s: %w", s.MasterName, lastErr)
}

// WaitFailover waits, until ctx ends, for the Sentinels to replace the
// master at old: every running Sentinel must name the same other address,
// none may still be failing over, and the server there must report role
// master. It returns the new master's address. Call it after killing or
// pausing the master at old.
func (s *Sentinel) WaitFailover(ctx context.Context, old string) (string, error) {
	var now string
	err := poll(ctx, "waiting for the Sentinels to replace "+old, func(ctx context.Context) error {
		now = ""
		for _, sn := range s.Sentinels {
			if !sn.running() {
				continue
			}
			addr, err := s.masterAddrFrom(ctx, sn.Addr)
			if err != nil {
				return err
			}
			if addr == old {
				return fmt.Errorf("Sentinel %s still names %s", sn.Addr, old)
			}
			if now != "" && addr != now {
				return fmt.Errorf("the Sentinels disagree: %s and %s", now, addr)
			}
			now = addr
			flags, err := s.masterFlags(ctx, sn.Addr)
			if err != nil {
				return err
			}
			if strings.Contains(flags, "failover") {
				return fmt.Errorf("Sentinel %s reports flags %s", sn.Addr, flags)
			}
		}
		if now == "" {
			return errors.New("no Sentinel is running")
		}
		r, err := role(ctx, now)
		if err != nil {
			return err
		}
		if r != "master" {
			return fmt.Errorf("%s reports role %s", now, r)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return now, nil
}

// ready reports, as an error, the first thing that keeps a failover from
// starting at once: a replica out of sync, or a Sentinel that has not yet
// found the replica or the other Sentinels.
func (s *Sentinel) ready(ctx context.Context) error {
	link, err := infoField(ctx, s.Replica.Addr, "replication", "master_link_status")
	if err != nil {
		return err
	}
	if link != "up" {
		return fmt.Errorf("replica %s reports master_link_status:%s", s.Replica.Addr, link)
	}
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(probeOptions(sn.Addr))
		replicas, err := c.Replicas(ctx, s.MasterName).Result()
		if err == nil && (len(replicas) != 1 || net.JoinHostPort(replicas[0]["ip"], replicas[0]["port"]) != s.Replica.Addr) {
			err = fmt.Errorf("knows replicas %v, want %s", replicas, s.Replica.Addr)
		}
		if err == nil {
			var others []map[string]string
			others, err = c.Sentinels(ctx, s.MasterName).Result()
			if err == nil && len(others) != len(s.Sentinels)-1 {
				err = fmt.Errorf("knows %d other Sentinels, want %d", len(others), len(s.Sentinels)-1)
			}
		}
		c.Close()
		if err != nil {
			return fmt.Errorf("Sentinel %s: %w", sn.Addr, err)
		}
	}
	return nil
}

// masterAddrFrom asks the Sentinel at addr for the master's address.
func (s *Sentinel) masterAddrFrom(ctx context.Context, addr string) (string, error) {
	c := redis.NewSentinelClient(probeOptions(addr))
	defer c.Close()
	hostPort, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		return "", fmt.Errorf("Sentinel %s: %w", addr, err)
	}
	if len(hostPort) != 2 {
		return "", fmt.Errorf("Sentinel %s: master address %q, want host and port", addr, hostPort)
	}
	return net.JoinHostPort(hostPort[0], hostPort[1]), nil
}

// masterFlags returns the flags the Sentinel at addr keeps for the master,
// such as "master" or "master,failover_in_progress".
func (s *Sentinel) masterFlags(ctx context.Context, addr string) (string, error) {
	c := redis.NewSentinelClient(probeOptions(addr))
	defer c.Close()
	m, err := c.Master(ctx, s.MasterName).Result()
	if err != nil {
		return "", fmt.Errorf("Sentinel %s: %w", addr, err)
	}
	return m["flags"], nil
}
