package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// A loser is a dialer for go-redis whose connections lose answers: while
// it has losses to make, or at random a fraction of the time, a
// connection that sent one of the store's programs reads Redis's reply,
// which proves Redis ran it, then throws it away and breaks, as a network
// that failed at that moment would. go-redis sends a command again when
// its connection breaks; the store's programs must not be.
type loser struct {
	losses   atomic.Int64  // still to make
	fraction atomic.Uint64 // math.Float64bits of the fraction of answers to lose; 0: none
	lost     atomic.Int64  // made
	charges  atomic.Int64  // made of answers to writes that carried a backlog's charge
}

// take takes one of the losses still to make, if any, or draws one at
// the loser's fraction.
func (l *loser) take() bool {
	if f := math.Float64frombits(l.fraction.Load()); f > 0 && rand.Float64() < f {
		return true
	}
	for {
		n := l.losses.Load()
		if n <= 0 {
			return false
		}
		if l.losses.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (l *loser) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &losingConn{Conn: c, l: l}, nil
}

type losingConn struct {
	net.Conn
	l       *loser
	armed   atomic.Bool // the last write sent a program
	charged atomic.Bool // the last write sent a backlog's charge
}

// programs are the commands that run the store's programs.
var programs = [][]byte{[]byte("fcall"), []byte("FCALL"), []byte("evalsha"), []byte("EVALSHA"), []byte("eval"), []byte("EVAL")}

func (c *losingConn) Write(p []byte) (int, error) {
	for _, name := range programs {
		if bytes.Contains(p, name) {
			c.armed.Store(true)
			break
		}
	}
	if bytes.Contains(p, []byte(chargeProgram.function)) || bytes.Contains(p, []byte(chargeProgram.script.Hash())) {
		c.charged.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *losingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.Swap(false) {
		charged := c.charged.Swap(false)
		if c.l.take() {
			c.l.lost.Add(1)
			if charged {
				c.l.charges.Add(1)
			}
			c.Conn.Close()
			return 0, io.ErrUnexpectedEOF
		}
	}
	return n, err
}

// TestLostAnswerNotSentAgain runs decisions, alone, in batches on a single
// server and in pipelines on a Redis Cluster, and a usage charge, while
// connections break after Redis ran the call and before its answer
// arrived; go-redis's clients keep their default of three retries. No
// call may run on Redis twice: what Redis counts is at most the number of
// calls made (a call that failed before it was sent, on a connection
// broken meanwhile, is not counted), and at least the number that
// succeeded; each answer lost is an error.
func TestLostAnswerNotSentAgain(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	cluster := redistest.SharedCluster(t)
	single := func(l *loser) RedisClient {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: l.dial, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	clustered := func(l *loser) RedisClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), Dialer: l.dial, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	limits := limitsOf(t, ratelimit.Limit{Name: "m", Quota: 1_000_000, Window: time.Minute})
	for _, tt := range []struct {
		name     string
		client   func(*loser) RedisClient
		maxBatch int
		workers  int
		scripts  bool
	}{
		{"alone", single, 1, 1, false},
		{"alone, scripts", single, 1, 1, true},
		{"batches", single, 0, 32, false},
		{"cluster pipelines", clustered, 0, 32, false},
		{"cluster pipelines, scripts", clustered, 0, 32, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := &loser{}
			s := newStore(t, tt.client(l), RedisOptions{Prefix: fmt.Sprintf("resend%d:", time.Now().UnixNano()), MaxBatch: tt.maxBatch, DenyCacheSize: noDenyCache})
			if tt.scripts {
				s.fn.pin(pathScripts)
			}
			ctx := context.Background()
			keys := []string{"a", "b", "c", "d", "e", "f"} // several slots of a cluster
			const perWorker = 60
			var calls, failed atomic.Int64
			counts := make([]atomic.Int64, len(keys))
			succeeded := make([]atomic.Int64, len(keys))
			var wg sync.WaitGroup
			for w := range tt.workers {
				wg.Go(func() {
					for i := range perWorker {
						if i%5 == 2 {
							l.losses.Add(1)
						}
						k := (w + i) % len(keys)
						_, err := s.Allow(ctx, keys[k], 1, limits)
						calls.Add(1)
						counts[k].Add(1)
						if err != nil {
							failed.Add(1)
						} else {
							succeeded[k].Add(1)
						}
					}
				})
			}
			wg.Wait()
			l.losses.Store(0)
			var counted int64
			for k, key := range keys {
				d, err := s.Peek(ctx, key, 1, limits)
				if err != nil {
					t.Fatalf("Peek(%s): %v", key, err)
				}
				used := int64(1_000_000 - d.Results()[0].Remaining)
				counted += used
				if used > counts[k].Load() || used < succeeded[k].Load() {
					t.Errorf("key %s: Redis counts %d, but %d calls were made, %d of them answered", key, used, counts[k].Load(), succeeded[k].Load())
				}
			}
			t.Logf("%d calls, %d answers lost, %d calls failed; Redis counts %d", calls.Load(), l.lost.Load(), failed.Load(), counted)
			if l.lost.Load() == 0 || failed.Load() == 0 {
				t.Fatalf("%d answers lost and %d calls failed: the test lost nothing", l.lost.Load(), failed.Load())
			}
		})
	}

	t.Run("usage charged", func(t *testing.T) {
		l := &loser{}
		s := newStore(t, single(l), RedisOptions{Prefix: fmt.Sprintf("resend%d:", time.Now().UnixNano()), MaxBatch: 1})
		usage := limitsOf(t, ratelimit.Limit{Name: "u", Quota: 1_000_000, Window: time.Minute, Usage: true})
		ctx := context.Background()
		var charged, failed int64
		for i := range 40 {
			d, err := s.Allow(ctx, "k", 1, usage)
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			if i%4 == 1 {
				l.losses.Add(1)
			}
			_, err = s.End(ctx, "k", 10, usage, d)
			charged += 10
			if err != nil {
				failed++
			}
		}
		l.losses.Store(0)
		d, err := s.Peek(ctx, "k", 1, usage)
		if err != nil {
			t.Fatalf("Peek: %v", err)
		}
		t.Logf("%d units charged in 40 calls, %d answers lost, %d failed; Redis holds %d", charged, l.lost.Load(), failed, 1_000_000-d.Results()[0].Remaining)
		if got := int64(1_000_000 - d.Results()[0].Remaining); got != charged {
			t.Errorf("Redis holds %d units, want the %d charged", got, charged)
		}
		if l.lost.Load() == 0 || failed == 0 {
			t.Fatalf("%d answers lost and %d calls failed: the test lost nothing", l.lost.Load(), failed)
		}
	})
}
