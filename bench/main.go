// Command bench compares this library's stores with the peer Go rate
// limiters, side by side, on one Redis and in process: decisions/s
// calling the limiters, or, with -http, requests/s through their net/http
// middleware. See README.md.
//
//	cd bench && go run . [-redis URL] [-duration 3s] [-callers 1,8,64] [-out FILE] [-only REGEX]
//	cd bench && go run . -http [-connections 64] [-loadgen auto|wrk|go] [-redis URL] [-duration 3s] [-out FILE] [-only REGEX]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

type config struct {
	redisURL string
	duration time.Duration
	callers  []int
	repeat   int
	out      string
	only     *regexp.Regexp
	// cluster, when above 0, runs the Redis rows that support it on a
	// Redis Cluster of that many masters, started by the benchmark.
	cluster int
	// cpuProfile, when set, is the file of a CPU profile of the whole
	// run (with -http and wrk: the server side only).
	cpuProfile string
	// The HTTP benchmark's: -http, -connections, -loadgen.
	http    bool
	conns   int
	loadgen string

	// The leased benchmark's: -leased, -processes.
	leased    bool
	processes int

	// -goside: the Go side per request against the peers.
	goSide bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == loadgenCommand {
		os.Exit(loadgenMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == leasedCommand {
		os.Exit(leasedMain(os.Args[2:]))
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	redisURL := fs.String("redis", "", "use the Redis at this URL (redis://host:port/db) instead of starting a redis-server; FLUSHALL is run on it between cells")
	duration := fs.Duration("duration", 3*time.Second, "timed duration of each cell")
	callers := fs.String("callers", "1,8,64", "comma-separated numbers of concurrent callers")
	out := fs.String("out", "", "also write the markdown report to this file")
	repeat := fs.Int("repeat", 1, "run every cell this many times, round-robin over the rows, and report each cell's median run by decisions/s")
	only := fs.String("only", "", "run only the rows whose \"workload/contender\" matches this regular expression (e.g. 'hot-key/.*redis')")
	httpMode := fs.Bool("http", false, "run the HTTP benchmark: requests/s through each limiter's net/http middleware on a loopback server, instead of decisions/s")
	conns := fs.Int("connections", 64, "with -http: keep-alive connections of the load generator")
	cluster := fs.Int("cluster", 0, "start a Redis Cluster of this many masters on loopback and run this library's Redis rows on it (a redis.ClusterClient); the peers' rows are left out")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process over the whole run to this file (with -only, one row's; with -http and wrk, the servers' side alone)")
	loadgen := fs.String("loadgen", "auto", "with -http: the load generator, wrk, go (this program's own), or auto (wrk when on PATH, else go)")
	leased := fs.Bool("leased", false, "run the leased hot-key benchmark: instance processes deciding one hot key under a leased limit on one redis-server")
	processes := fs.Int("processes", 4, "with -leased: the instance processes")
	goSide := fs.Bool("goside", false, "run the Go-side comparison: this library against the cheapest peers, HTTP and decision cells, with a table of the goals")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg := &config{redisURL: *redisURL, duration: *duration, out: *out, repeat: *repeat, http: *httpMode, conns: *conns, loadgen: *loadgen, cluster: *cluster, cpuProfile: *cpuProfile, leased: *leased, processes: *processes, goSide: *goSide}
	if cfg.goSide && (cfg.http || cfg.leased || cfg.cluster > 0 || *only != "") {
		return nil, fmt.Errorf("-goside chooses its own cells: it does not go with -http, -leased, -cluster or -only")
	}
	if cfg.leased && (cfg.http || cfg.cluster > 0 || cfg.redisURL != "") {
		return nil, fmt.Errorf("-leased starts its own redis-server and instance processes: it does not go with -http, -cluster or -redis")
	}
	if cfg.processes < 1 {
		return nil, fmt.Errorf("-processes must be at least 1, got %d", cfg.processes)
	}
	if cfg.cluster < 0 {
		return nil, fmt.Errorf("-cluster must be 0 (off) or a number of masters, got %d", cfg.cluster)
	}
	if cfg.cluster > 0 && (cfg.http || cfg.redisURL != "") {
		return nil, fmt.Errorf("-cluster starts its own cluster for the decision benchmark: it does not go with -http or -redis")
	}
	if cfg.conns < 1 {
		return nil, fmt.Errorf("-connections must be at least 1, got %d", cfg.conns)
	}
	if cfg.duration <= 0 {
		return nil, fmt.Errorf("-duration must be positive, got %v", cfg.duration)
	}
	if cfg.repeat < 1 {
		return nil, fmt.Errorf("-repeat must be at least 1, got %d", cfg.repeat)
	}
	for _, f := range strings.Split(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-callers: %q is not a positive integer", f)
		}
		cfg.callers = append(cfg.callers, n)
	}
	var err error
	if cfg.only, err = regexp.Compile(*only); err != nil {
		return nil, fmt.Errorf("-only: %w", err)
	}
	return cfg, nil
}

// cell is one planned row of the table.
type cell struct {
	w       *workload
	c       *contender
	callers int
}

func run(cfg *config) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.redisURL != "" {
		// Without a server of ours, a second Ctrl-C just exits.
		go func() { <-ctx.Done(); stop() }()
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.goSide {
		return runGoSide(ctx, stop, cfg)
	}
	if cfg.http {
		return runHTTP(ctx, stop, cfg)
	}
	if cfg.leased {
		return runLeased(ctx, cfg)
	}

	plan, needRedis := planCells(cfg, cfg.only)
	if len(plan) == 0 {
		return noRowMatches(cfg.only, workloads()[0].id+"/"+contenders()[0].name)
	}
	return runReport(ctx, stop, cfg, needRedis, func(e *env, m machine) (string, bool, bool) {
		results := runRounds(ctx, e, plan, cfg)
		if results == nil {
			return "", false, false
		}
		return renderReport(m, cfg, results), slices.ContainsFunc(results, func(r *cellResult) bool { return r.skipped != "" }), true
	})
}

// noRowMatches says that -only selects no row of a table, of which
// example names one, and returns the exit status.
func noRowMatches(only *regexp.Regexp, example string) int {
	fmt.Fprintf(os.Stderr, "bench: -only %q matches no row; rows are named workload/contender, for example %s\n", only, example)
	return 2
}

// runReport starts the environment (see newEnv), runs the rows with run
// in it, and publishes the report run returns, with whether a row was
// skipped; run returns ok false when it was interrupted, and then there
// is no report. It returns the exit status.
func runReport(ctx context.Context, stop context.CancelFunc, cfg *config, needRedis bool, run func(e *env, m machine) (report string, skipped, ok bool)) int {
	e, redisVersion, closeEnv, code := newEnv(ctx, stop, cfg, needRedis)
	if code != 0 {
		return code
	}
	defer closeEnv()
	report, skipped, ok := run(e, machineInfo(redisVersion))
	if !ok {
		fmt.Fprintln(os.Stderr, "bench: interrupted; no report")
		return 130
	}
	return publish(report, cfg.out, skipped)
}

// planCells returns the cells whose workload/contender only matches, at
// each of cfg's caller counts, and whether any needs Redis.
func planCells(cfg *config, only *regexp.Regexp) (plan []cell, needRedis bool) {
	ws := workloads()
	cs := contenders()
	for i := range ws {
		for _, c := range cs {
			if !only.MatchString(ws[i].id+"/"+c.name) || (cfg.cluster > 0 && !c.cluster) {
				continue
			}
			for _, n := range cfg.callers {
				plan = append(plan, cell{&ws[i], c, n})
			}
			needRedis = needRedis || c.redis
		}
	}
	return plan, needRedis
}

// runRounds runs every cell of plan cfg.repeat times (see roundRobin) and
// returns each cell's median run; nil when interrupted.
func runRounds(ctx context.Context, e *env, plan []cell, cfg *config) []*cellResult {
	fmt.Fprintf(os.Stderr, "bench: %d cells of %v each, %d time(s)\n", len(plan), cfg.duration, cfg.repeat)
	runs := roundRobin(ctx, len(plan), cfg.repeat, func(i, round int) *cellResult {
		p := plan[i]
		r := runCell(ctx, e, p.w, p.c, p.callers, cfg.duration)
		if ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "bench: [%d/%d] round %d %s/%s callers=%d: %s\n", i+1, len(plan), round+1, p.w.id, p.c.name, p.callers, progressLine(r))
		}
		return r
	})
	if runs == nil {
		return nil
	}
	results := make([]*cellResult, len(plan))
	for i, rs := range runs {
		results[i] = median(rs)
	}
	return results
}

// roundRobin runs cells 0 to n-1 in turn, repeat rounds over all of them,
// so that slow drifts of the machine touch every cell alike, and returns
// each cell's runs; nil when ctx ends first (a cell it cut short is
// incomplete).
func roundRobin[T any](ctx context.Context, n, repeat int, run func(i, round int) T) [][]T {
	runs := make([][]T, n)
	for round := range repeat {
		for i := range n {
			if ctx.Err() != nil {
				return nil
			}
			r := run(i, round)
			if ctx.Err() != nil {
				return nil
			}
			runs[i] = append(runs[i], r)
		}
	}
	return runs
}

// newEnv returns what the contenders share and the version of Redis:
// with needRedis, the Redis of -redis, or a redis-server started here,
// which closeEnv stops. A non-zero code is the exit status of a failure.
func newEnv(ctx context.Context, stop context.CancelFunc, cfg *config, needRedis bool) (e *env, redisVersion string, closeEnv func(), code int) {
	e = &env{logx: newLogCounter()}
	closeEnv = func() {}
	if !needRedis {
		return e, "not used", closeEnv, 0
	}
	var opts *redis.Options
	var masters []string // with -cluster
	if cfg.redisURL != "" {
		var err error
		if opts, err = redis.ParseURL(cfg.redisURL); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -redis:", err)
			return nil, "", nil, 2
		}
		if opts.DB != 0 {
			fmt.Fprintf(os.Stderr, "bench: warning: -redis selects database %d, but go-zero's wrapper always uses database 0\n", opts.DB)
		}
	} else if cfg.cluster > 0 {
		cl, err := startCluster(cfg.cluster)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return nil, "", nil, 1
		}
		closeEnv = cl.Close
		go closeOnSecondSignal(ctx, stop, cl.Close)
		for _, m := range cl.Masters {
			masters = append(masters, m.Addr)
		}
		opts = &redis.Options{Addr: masters[0]}
		fmt.Fprintf(os.Stderr, "bench: started a Redis Cluster of %d masters on %s\n", len(masters), strings.Join(masters, ", "))
	} else {
		srv, err := startRedis()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return nil, "", nil, 1
		}
		closeEnv = func() { srv.Close() }
		go closeOnSecondSignal(ctx, stop, srv.Close)
		opts = &redis.Options{Addr: srv.Addr}
		fmt.Fprintf(os.Stderr, "bench: started redis-server on %s\n", srv.Addr)
	}
	e.redis = &redisTarget{opts: opts, cluster: masters}
	v, err := e.redis.version(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: Redis does not answer:", err)
		closeEnv()
		return nil, "", nil, 1
	}
	return e, v, closeEnv, 0
}

// closeOnSecondSignal waits for the first Ctrl-C (ctx done), then for a
// second one while a cell is finishing, which closes the servers the
// benchmark started and exits at once; the deferred stop is then a no-op.
func closeOnSecondSignal(ctx context.Context, stop context.CancelFunc, closeServers func()) {
	<-ctx.Done()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	stop()
	<-sig
	closeServers()
	os.Exit(130)
}

// median returns the run with the median decisions/s (the lower middle
// of an even count).
func median(rs []*cellResult) *cellResult {
	sorted := append([]*cellResult(nil), rs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].rate() < sorted[j].rate() })
	return sorted[(len(sorted)-1)/2]
}

func progressLine(r *cellResult) string {
	if r.skipped != "" {
		return "SKIPPED: " + r.skipped
	}
	s := fmt.Sprintf("%s decisions/s, p50 %s, p99 %s, allowed %d, denied %d, errors %d",
		formatRate(r.rate()), formatLatency(r.p50), formatLatency(r.p99), r.allowed, r.denied, r.errors)
	if r.firstErr != "" {
		s += " (first error: " + r.firstErr + ")"
	}
	return s
}
