package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a throwaway redis-server this program started: no
// persistence, loopback only, in a temporary directory. The library's own
// starter (internal/redistest) cannot be imported from this module, so
// this is a small copy of the same idea.
type redisServer struct {
	addr string
	dir  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// startRedis starts redis-server from PATH on a free loopback port and
// waits until it answers PING.
func startRedis() (*redisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (%v); install it or pass -redis redis://host:port", err)
	}
	var lastErr error
	// A free port can be taken by someone else before redis-server binds
	// it; try a few.
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startRedisOn(port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startRedisOn(port int) (*redisServer, error) {
	dir, err := os.MkdirTemp("", "ratelimit-bench-redis-")
	if err != nil {
		return nil, err
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	logfile := filepath.Join(dir, "redis.log")
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", logfile,
	)
	// If this program dies without cleaning up, the kernel kills the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logfile)
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on port %d exited (%v): %s", port, err, lastLines(string(log), 5))
		default:
		}
		if ping(s.addr) == nil {
			s.cmd = cmd
			return s, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server on port %d did not answer PING within 10s", port)
}

// stop kills the server and removes its directory. It is safe to call
// more than once and from several goroutines.
func (s *redisServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	// Wait until the port is closed, so that nothing outlives us.
	for range 200 {
		if ping(s.addr) != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.cmd = nil
	os.RemoveAll(s.dir)
}

// ping sends PING over a fresh connection and expects +PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New("unexpected reply to PING: " + strings.TrimSpace(line))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// redisTarget is the Redis every Redis-backed contender talks to.
type redisTarget struct {
	opts *redis.Options // parsed from -redis, or pointing at our server
}

// poolSize is the go-redis pool size of every client this program
// creates: more than the largest default caller count, so that no
// contender waits for a connection.
const poolSize = 128

// newClient returns a fresh go-redis client, created the same way for
// every contender: redis.NewClient with the target's options and
// PoolSize 128.
func (t *redisTarget) newClient() *redis.Client {
	o := *t.opts
	o.PoolSize = poolSize
	return redis.NewClient(&o)
}

// flush empties every database of the target, so that no cell sees
// another's keys.
func (t *redisTarget) flush(ctx context.Context) error {
	c := redis.NewClient(t.opts)
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

// version returns the server's redis_version from INFO server.
func (t *redisTarget) version(ctx context.Context) (string, error) {
	c := redis.NewClient(t.opts)
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "unknown", nil
}
