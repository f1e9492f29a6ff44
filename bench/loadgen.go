package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadSpec is what one run of a load generator sends: Conns keep-alive
// connections, each sending GET URL with one request in flight, for
// Duration, request i of a connection carrying the key httpKey(Prefix,
// Keys, start+i), each connection starting at an evenly spaced key.
type loadSpec struct {
	URL      string
	Keys     int
	Prefix   string
	Conns    int
	Duration time.Duration
}

// loadResult is what a load generator measured.
type loadResult struct {
	Requests uint64        // complete responses
	Elapsed  time.Duration // of the timed run
	P50, P99 time.Duration // latency of one request, send to end of response
	Errors   uint64        // connect, read and write errors, timeouts
	Non2xx   uint64        // responses other than 2xx and 3xx
	CPU      time.Duration // the load generator's own CPU time, user + system
	FirstErr string        // the first error, when the generator tells it
}

func (r loadResult) rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// httpKey is the value of key i of a workload's key space: the prefix
// alone for a one-key space, else the prefix and five digits.
func httpKey(prefix string, keys, i int) string {
	if keys == 1 {
		return prefix
	}
	return fmt.Sprintf("%s%05d", prefix, i)
}

// A loadGenerator runs one timed load.
type loadGenerator interface {
	run(ctx context.Context, s loadSpec) (loadResult, error)
	describe() string // for the report
}

// chooseLoadGenerator returns the generator -loadgen names: "wrk", "go",
// or "auto" (wrk when it is on PATH, else go).
func chooseLoadGenerator(name string, conns int) (loadGenerator, error) {
	wrkPath, wrkErr := exec.LookPath("wrk")
	switch name {
	case "auto":
		if wrkErr != nil {
			return goLoadGenerator{}, nil
		}
	case "wrk":
		if wrkErr != nil {
			return nil, fmt.Errorf("-loadgen wrk: wrk is not on PATH (%v); install it (Debian: apt-get install wrk) or use -loadgen go", wrkErr)
		}
	case "go":
		return goLoadGenerator{}, nil
	default:
		return nil, fmt.Errorf("-loadgen: %q is not auto, wrk or go", name)
	}
	return &wrkLoadGenerator{path: wrkPath, threads: min(runtime.NumCPU(), conns)}, nil
}

// wrkScript makes wrk spread its requests over the workload's keys and
// print its results on one line that parseWrkOutput reads.
//
//go:embed wrk.lua
var wrkScript []byte

// wrkLoadGenerator runs wrk, one process per run.
type wrkLoadGenerator struct {
	path    string
	threads int
}

func (g *wrkLoadGenerator) describe() string {
	v := "wrk"
	// wrk -v prints its version and exits with status 1.
	out, _ := exec.Command(g.path, "-v").CombinedOutput()
	if line, _, _ := strings.Cut(string(out), "\n"); strings.HasPrefix(line, "wrk ") {
		v, _, _ = strings.Cut(line, " [")
	}
	return fmt.Sprintf("%s, %d threads, with a Lua script choosing each request's key", v, g.threads)
}

// wrkSeconds is d in wrk's -d syntax: whole seconds, at least one.
func wrkSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))) + "s"
}

func (g *wrkLoadGenerator) run(ctx context.Context, s loadSpec) (loadResult, error) {
	f, err := os.CreateTemp("", "bench-*.lua")
	if err != nil {
		return loadResult{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(wrkScript); err != nil {
		f.Close()
		return loadResult{}, err
	}
	if err := f.Close(); err != nil {
		return loadResult{}, err
	}
	cmd := exec.CommandContext(ctx, g.path,
		"-t", strconv.Itoa(g.threads), "-c", strconv.Itoa(s.Conns), "-d", wrkSeconds(s.Duration),
		"-s", f.Name(), s.URL,
		"--", strconv.Itoa(s.Keys), s.Prefix, strconv.Itoa(g.threads))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return loadResult{}, fmt.Errorf("wrk: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	r, err := parseWrkOutput(stdout.String())
	if err != nil {
		return loadResult{}, err
	}
	r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r, nil
}

// parseWrkOutput reads the line wrk.lua's done() prints:
//
//	bench-wrk requests=N duration_us=N p50_us=N p99_us=N connect=N read=N write=N timeout=N status=N
//
// status is wrk's count of responses other than 2xx and 3xx.
func parseWrkOutput(out string) (loadResult, error) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "bench-wrk ")
		if !ok {
			continue
		}
		v := map[string]uint64{}
		for _, field := range strings.Fields(rest) {
			k, s, ok := strings.Cut(field, "=")
			if !ok {
				return loadResult{}, fmt.Errorf("wrk output: %q is not name=value", field)
			}
			// LuaJIT's %d takes the numbers wrk gives it; a fractional
			// one (latency percentiles) is truncated, as %d would.
			n, err := strconv.ParseFloat(s, 64)
			if err != nil || n < 0 {
				return loadResult{}, fmt.Errorf("wrk output: %s=%q is not a count", k, s)
			}
			v[k] = uint64(n)
		}
		for _, k := range []string{"requests", "duration_us", "p50_us", "p99_us", "connect", "read", "write", "timeout", "status"} {
			if _, ok := v[k]; !ok {
				return loadResult{}, fmt.Errorf("wrk output: no %s in %q", k, line)
			}
		}
		r := loadResult{
			Requests: v["requests"],
			Elapsed:  time.Duration(v["duration_us"]) * time.Microsecond,
			P50:      time.Duration(v["p50_us"]) * time.Microsecond,
			P99:      time.Duration(v["p99_us"]) * time.Microsecond,
			Errors:   v["connect"] + v["read"] + v["write"] + v["timeout"],
			Non2xx:   v["status"],
		}
		if r.Errors > 0 {
			r.FirstErr = fmt.Sprintf("wrk: connect %d, read %d, write %d, timeout %d", v["connect"], v["read"], v["write"], v["timeout"])
		}
		return r, nil
	}
	return loadResult{}, fmt.Errorf("wrk output: no bench-wrk line (was the script run?): %q", out)
}

// goLoadGenerator runs this program's own generator, goLoad, in a child
// process (this executable with the loadgenCommand argument), so that its
// CPU time is its own and it does not share the server's scheduler.
type goLoadGenerator struct{}

// loadgenCommand is the first argument that makes this program the Go
// load generator's child process.
const loadgenCommand = "http-loadgen"

func (goLoadGenerator) describe() string {
	return "the Go load generator of this program (raw keep-alive connections, `http.ReadResponse`), in a child process"
}

func (goLoadGenerator) run(ctx context.Context, s loadSpec) (loadResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return loadResult{}, err
	}
	cmd := exec.CommandContext(ctx, exe, loadgenCommand,
		"-url", s.URL, "-keys", strconv.Itoa(s.Keys), "-prefix", s.Prefix,
		"-conns", strconv.Itoa(s.Conns), "-duration", s.Duration.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return loadResult{}, fmt.Errorf("load generator: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var r loadResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return loadResult{}, fmt.Errorf("load generator output: %w", err)
	}
	r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r, nil
}

// loadgenMain is the child process: it runs goLoad with the spec of its
// arguments and prints the result as JSON.
func loadgenMain(args []string) int {
	fs := flag.NewFlagSet(loadgenCommand, flag.ContinueOnError)
	var s loadSpec
	fs.StringVar(&s.URL, "url", "", "URL to GET")
	fs.IntVar(&s.Keys, "keys", 1, "number of keys")
	fs.StringVar(&s.Prefix, "prefix", "", "key prefix")
	fs.IntVar(&s.Conns, "conns", 64, "keep-alive connections")
	fs.DurationVar(&s.Duration, "duration", 3*time.Second, "timed duration")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r, err := goLoad(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// connStats is one connection's tally, padded so that connections do not
// share cache lines.
type connStats struct {
	requests, errors, non2xx uint64
	firstErr                 error
	hist                     histogram
	_                        [64]byte
}

// goLoad sends s's load and measures it: s.Conns goroutines, each with a
// connection of its own, writing a prepared request and reading the
// response with http.ReadResponse, one at a time. A connection that fails
// or that the server closes is dialed again. The requests, one per key,
// are built before the run.
func goLoad(s loadSpec) (loadResult, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return loadResult{}, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return loadResult{}, fmt.Errorf("load generator: %q is not an http:// URL", s.URL)
	}
	if s.Keys < 1 || s.Conns < 1 {
		return loadResult{}, fmt.Errorf("load generator: %d keys, %d connections: both must be at least 1", s.Keys, s.Conns)
	}
	reqs := make([][]byte, s.Keys)
	for i := range reqs {
		reqs[i] = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\n%s: %s\r\n\r\n", u.RequestURI(), u.Host, keyHeader, httpKey(s.Prefix, s.Keys, i))
	}

	stats := make([]connStats, s.Conns)
	start := make(chan struct{})
	var deadline time.Time
	var wg sync.WaitGroup
	for c := range s.Conns {
		wg.Go(func() {
			<-start
			sendLoop(u.Host, reqs, c*s.Keys/s.Conns, deadline, &stats[c])
		})
	}
	t0 := time.Now()
	deadline = t0.Add(s.Duration)
	close(start)
	wg.Wait()

	r := loadResult{Elapsed: time.Since(t0)}
	var hist histogram
	for i := range stats {
		st := &stats[i]
		r.Requests += st.requests
		r.Errors += st.errors
		r.Non2xx += st.non2xx
		if st.firstErr != nil && r.FirstErr == "" {
			r.FirstErr = st.firstErr.Error()
		}
		hist.merge(&st.hist)
	}
	r.P50, r.P99 = hist.quantile(0.50), hist.quantile(0.99)
	return r, nil
}

// sendLoop is one connection of goLoad, from key k on, until deadline.
func sendLoop(addr string, reqs [][]byte, k int, deadline time.Time, st *connStats) {
	var conn net.Conn
	var br *bufio.Reader
	fail := func(err error) {
		st.errors++
		if st.firstErr == nil {
			st.firstErr = err
		}
		if conn != nil {
			conn.Close()
			conn = nil
		}
	}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		t := time.Now()
		if !t.Before(deadline) {
			return
		}
		if conn == nil {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				fail(err)
				time.Sleep(10 * time.Millisecond) // a refused dial would spin
				continue
			}
			conn = c
			if br == nil {
				br = bufio.NewReaderSize(conn, 4096)
			} else {
				br.Reset(conn)
			}
		}
		// A response may not take more than 2s, as with wrk's default.
		_ = conn.SetDeadline(t.Add(2 * time.Second))
		if _, err := conn.Write(reqs[k]); err != nil {
			fail(err)
			continue
		}
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("timeout: %w", err)
			}
			fail(err)
			continue
		}
		st.hist.record(time.Since(t))
		st.requests++
		if resp.StatusCode < 200 || resp.StatusCode > 399 {
			st.non2xx++
		}
		if resp.Close {
			conn.Close()
			conn = nil
		}
		k++
		if k == len(reqs) {
			k = 0
		}
	}
}
