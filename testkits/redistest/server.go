// Package redistest starts throwaway redis-server processes for tests, on
// free loopback ports, and stops them when the tests end.
//
// When redis-server is not on PATH, [Require] skips the test with the
// reason, unless RATELIMIT_REQUIRE_REDIS=1 is set, when it fails it. A
// package that uses it runs its tests through [Main], which stops every
// server it started.
//
// [RequireCluster], [RequireClusterWithReplicas] and [RequireSentinel]
// start groups of servers; the last two are for fault tests, which kill a
// master and wait for the failover, and which guard themselves with
// [RequireFaults]. [SharedCluster] is one cluster that the tests of a
// package take turns on, as [Shared] is one server.
package redistest

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
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns a missing
// redis-server from a skip into a failure.
const RequireEnv = "RATELIMIT_REQUIRE_REDIS"

// Server is a redis-server process owned by a test.
type Server struct {
	// Addr is the server's host:port on the loopback interface.
	Addr string

	port int
	dir  string
	args []string
	// sentinelConf, when set, is the path of a config file that launch
	// passes first, with --sentinel, so that the process runs as a Sentinel.
	sentinelConf string

	mu  sync.Mutex
	cmd *exec.Cmd
}

var (
	mu      sync.Mutex
	servers []*Server
	shared  *Server
)

// Main runs the tests of m and then stops every server this package
// started; use it as os.Exit(redistest.Main(m)) in TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	for _, s := range servers {
		s.Kill()
		os.RemoveAll(s.dir)
	}
	servers = nil
	return code
}

// Require returns a new server for t alone, stopped when t ends. Extra
// arguments go to redis-server's command line, for example "--cluster-enabled", "yes".
func Require(t testing.TB, args ...string) *Server {
	t.Helper()
	s := started(t, func() (*Server, error) { return Start(args...) })
	t.Cleanup(s.Kill)
	return s
}

// Shared returns a server shared by all tests of the package, started on
// first use and stopped by [Main]. Tests sharing it must use distinct keys.
func Shared(t testing.TB) *Server {
	t.Helper()
	return once(t, &mu, &shared, func() (*Server, error) { return start(nil, "") })
}

// started returns what start starts, skipping or failing t as [Require]
// does.
func started[T any](t testing.TB, start func() (T, error)) T {
	t.Helper()
	skipUnlessInstalled(t)
	v, err := start()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return v
}

// once returns *v, which start starts, under mu, the first time.
func once[T comparable](t testing.TB, mu *sync.Mutex, v *T, start func() (T, error)) T {
	t.Helper()
	var zero T
	mu.Lock()
	defer mu.Unlock()
	if *v == zero {
		*v = started(t, start)
	}
	return *v
}

func skipUnlessInstalled(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("redistest: redis-server is not on PATH and %s=1: %v", RequireEnv, err)
		}
		t.Skipf("redistest: skipping: redis-server is not on PATH (%v); install it, or set %s=1 to make this a failure", err, RequireEnv)
	}
}

// Start starts a redis-server on a free loopback port and waits until it
// answers PING. The caller stops it with Kill; [Main] does so too.
func Start(args ...string) (*Server, error) {
	mu.Lock()
	defer mu.Unlock()
	return start(args, "")
}

// start starts a server on a free port; a non-empty sentinelConf is the
// text of a config file that makes it a Sentinel.
func start(args []string, sentinelConf string) (*Server, error) {
	var lastErr error
	// A free port can be taken by someone else before redis-server binds
	// it; try a few.
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startOn(port, args, sentinelConf)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// startOn starts a server on port, in a directory of its own, where a
// non-empty sentinelConf is written as sentinel.conf.
func startOn(port int, args []string, sentinelConf string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: dir, args: args}
	if sentinelConf != "" {
		s.sentinelConf = filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(s.sentinelConf, []byte(sentinelConf), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	servers = append(servers, s)
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch runs redis-server on s.port and waits for it to answer.
func (s *Server) launch() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.args...)
	if s.sentinelConf != "" {
		// Sentinel rewrites its config file, which must come first.
		args = append([]string{s.sentinelConf, "--sentinel"}, args...)
	}
	cmd := exec.Command("redis-server", args...)
	// Kill the server if the test binary dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on port %d exited (%v): %s", s.port, err, lastLines(string(log), 5))
		default:
		}
		if ping(s.Addr) == nil {
			// On a busy machine another process can take the port before
			// this server binds it (or again, between a Kill and a
			// Restart): the server that answers must be this one.
			pid, err := processID(s.Addr)
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if pid != cmd.Process.Pid {
				_ = cmd.Process.Kill()
				<-exited
				return fmt.Errorf("redis-server on port %d: another process (pid %d) answers there, not the server started (pid %d)", s.port, pid, cmd.Process.Pid)
			}
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return fmt.Errorf("redis-server on port %d did not answer PING within 10s", s.port)
}

// processID returns the process id of the server answering at addr.
func processID(addr string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pid, err := infoField(ctx, addr, "server", "process_id")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(pid))
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

// Kill stops the server at once with SIGKILL, as a crash would. It is a
// no-op when the server is not running.
func (s *Server) Kill() { s.signal(syscall.SIGKILL, true) }

// Close kills the server and removes its directory, for a server started
// outside [Main]. It is safe to call more than once.
func (s *Server) Close() {
	s.Kill()
	os.RemoveAll(s.dir)
}

// Pause freezes the server with SIGSTOP: connections stay open but
// nothing is answered, like a hung server. [Server.Resume] undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, false) }

// Resume continues a paused server.
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

// Restart starts a stopped server again on the same port, with no data.
func (s *Server) Restart() error {
	s.Kill()
	return s.launch()
}

// running reports whether the server was started and not killed since; a
// paused server is running.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

func (s *Server) signal(sig syscall.Signal, stops bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	if stops {
		// Resume first in case it was paused, so that the kill lands, then
		// wait until the port is free.
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		for range 200 {
			if ping(s.Addr) != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		s.cmd = nil
	}
}
