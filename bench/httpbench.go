package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// httpWorkload says which keys the load generator sends and under which
// limit.
type httpWorkload struct {
	id    string // used in -only and the table
	title string
	limit limitSpec
	keys  int // size of the key space; key i is httpKey(prefix, keys, i)
	// prefix of the keys, or the one key of a one-key space
	prefix string
	// exhaust: one untimed request before the warm-up spends the one
	// key's quota, so that every timed request should be denied.
	exhaust bool
	// wantStatus is what every timed response of a limiter should be
	// (the bare handler always answers 200).
	wantStatus int
}

func httpWorkloads() []httpWorkload {
	return []httpWorkload{
		{
			id:         "many-keys",
			title:      "many keys, all allowed",
			limit:      limitSpec{Quota: 100_000, Window: time.Hour},
			keys:       10_000,
			prefix:     "user:",
			wantStatus: http.StatusOK,
		},
		{
			id:         "hot-key-allowed",
			title:      "one hot key, all allowed",
			limit:      limitSpec{Quota: 100_000_000, Window: time.Hour},
			keys:       1,
			prefix:     "hot",
			wantStatus: http.StatusOK,
		},
		{
			id:         "hot-key",
			title:      "one hot key, all denied",
			limit:      limitSpec{Quota: 1, Window: time.Hour},
			keys:       1,
			prefix:     "hot",
			exhaust:    true,
			wantStatus: http.StatusTooManyRequests,
		},
	}
}

// want is the status every timed response of c should have in w.
func (w *httpWorkload) want(c *httpContender) int {
	if c.family == httpFamBare {
		return http.StatusOK
	}
	return w.wantStatus
}

// helloBody is what the handler behind every middleware writes.
var helloBody = []byte("hello\n")

func hello(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(helloBody) }

// statusCounts counts the statuses the server wrote, around the
// middleware, so that the counts do not depend on the load generator.
// A request whose client went away before it was answered (the load
// generator closing its connections at the end of its run, with
// requests in flight) is counted apart, as abandoned: a middleware
// may answer it with an error status, which it never sends.
type statusCounts struct {
	codes     [600]atomic.Uint64 // by status; 0 for any status out of range
	abandoned atomic.Uint64
}

// statusSnapshot is a copy of statusCounts, or a difference of two.
type statusSnapshot struct {
	ok, tooMany, other uint64
	codes              [600]uint64
	abandoned          uint64
}

func (s *statusCounts) snapshot() statusSnapshot {
	var n statusSnapshot
	for i := range s.codes {
		n.codes[i] = s.codes[i].Load()
	}
	n.abandoned = s.abandoned.Load()
	n.sum()
	return n
}

// sum sets ok, tooMany and other from codes.
func (a *statusSnapshot) sum() {
	a.ok, a.tooMany, a.other = 0, 0, 0
	for code, n := range a.codes {
		switch code {
		case http.StatusOK:
			a.ok += n
		case http.StatusTooManyRequests:
			a.tooMany += n
		default:
			a.other += n
		}
	}
}

func (a statusSnapshot) sub(b statusSnapshot) statusSnapshot {
	d := statusSnapshot{abandoned: a.abandoned - b.abandoned}
	for i := range a.codes {
		d.codes[i] = a.codes[i] - b.codes[i]
	}
	d.sum()
	return d
}

func (a statusSnapshot) total() uint64 { return a.ok + a.tooMany + a.other }

// others lists the statuses other than 200 and 429: "503 ×28, 0 ×1"
// (0: out of range).
func (a statusSnapshot) others() string {
	var parts []string
	for code, n := range a.codes {
		if n > 0 && code != http.StatusOK && code != http.StatusTooManyRequests {
			parts = append(parts, fmt.Sprintf("%d ×%s", code, formatCount(n)))
		}
	}
	return strings.Join(parts, ", ")
}

// wrap returns h counting the status of each response it writes.
func (s *statusCounts) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := statusWriter{ResponseWriter: w}
		h.ServeHTTP(&sw, r)
		if r.Context().Err() != nil {
			s.abandoned.Add(1)
			return
		}
		code := sw.status
		switch {
		case code == 0:
			code = http.StatusOK // nothing written: net/http sends 200
		case code >= len(s.codes):
			code = 0
		}
		s.codes[code].Add(1)
	})
}

// statusWriter records the status written through it; 0 until a header
// or body is written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// httpResult is what one (workload, contender) cell measured.
type httpResult struct {
	workload  *httpWorkload
	contender *httpContender

	load     loadResult
	statuses statusSnapshot // written by the server over the timed run
	// redisCPU is the Redis server's CPU time over the timed run, when
	// redisCPUOK (Redis rows only).
	redisCPU   time.Duration
	redisCPUOK bool
	// exhaustStatus is the status of the request that spends the hot
	// key, or exhaustErr its failure.
	exhaustStatus int
	exhaustErr    error
	skipped       string // why the cell did not run, if it did not
}

func (r *httpResult) rate() float64 { return r.load.rate() }

// wrong counts responses whose status is not the one the workload
// expects of the row.
func (r *httpResult) wrong() uint64 {
	switch r.workload.want(r.contender) {
	case http.StatusOK:
		return r.statuses.tooMany + r.statuses.other
	default:
		return r.statuses.ok + r.statuses.other
	}
}

// runHTTPCell serves the handler behind a fresh middleware of c on a
// loopback port, spends the hot key if w says so, warms up with the Go
// load generator, then runs lg for d.
func runHTTPCell(ctx context.Context, e *env, w *httpWorkload, c *httpContender, lg loadGenerator, conns int, d time.Duration) *httpResult {
	res := &httpResult{workload: w, contender: c}
	if c.redis {
		if err := e.redis.flush(ctx); err != nil {
			res.skipped = "FLUSHALL failed: " + err.Error()
			return res
		}
	}
	h, release, err := c.wrap(e, w.limit, http.HandlerFunc(hello))
	if err != nil {
		res.skipped = "setup failed: " + err.Error()
		return res
	}
	defer release()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		res.skipped = "listen failed: " + err.Error()
		return res
	}
	var counts statusCounts
	srv := &http.Server{Handler: counts.wrap(h), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	// Shut down before release (deferred earlier, run later): handlers
	// still running when the load stops finish with a working limiter.
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	url := "http://" + ln.Addr().String() + "/"

	if w.exhaust {
		res.exhaustStatus, res.exhaustErr = getOnce(url, w.prefix)
	}
	spec := loadSpec{URL: url, Keys: w.keys, Prefix: w.prefix, Conns: conns}
	warm := spec
	warm.Duration = min(max(d/10, 50*time.Millisecond), 500*time.Millisecond)
	if _, err := goLoad(warm); err != nil {
		res.skipped = "warm-up failed: " + err.Error()
		return res
	}

	var meter *cpuMeter
	var cpu0 time.Duration
	if c.redis {
		meter = e.redis.newCPUMeter()
		defer meter.close()
		cpu0, err = meter.read(ctx)
		res.redisCPUOK = err == nil
	}
	before := counts.snapshot()
	spec.Duration = d
	res.load, err = lg.run(ctx, spec)
	if err != nil {
		res.skipped = err.Error()
		return res
	}
	res.statuses = counts.snapshot().sub(before)
	if res.redisCPUOK {
		cpu1, err := meter.read(ctx)
		res.redisCPU, res.redisCPUOK = cpu1-cpu0, err == nil
	}
	return res
}

// getOnce sends one request with key and returns its status.
func getOnce(url, key string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set(keyHeader, key)
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	c.CloseIdleConnections()
	return resp.StatusCode, nil
}

// httpCell is one planned row of the HTTP table.
type httpCell struct {
	w *httpWorkload
	c *httpContender
}

// runHTTP is run for -http: every selected cell, -repeat rounds
// round-robin, each cell's median round by requests/s, then the report.
func runHTTP(ctx context.Context, stop context.CancelFunc, cfg *config) int {
	lg, err := chooseLoadGenerator(cfg.loadgen, cfg.conns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	plan, needRedis := planHTTP(cfg.only)
	if len(plan) == 0 {
		return noRowMatches(cfg.only, httpWorkloads()[0].id+"/"+httpContenders()[1].name)
	}
	return runReport(ctx, stop, cfg, needRedis, func(e *env, m machine) (string, bool, bool) {
		results := runHTTPRounds(ctx, e, plan, lg, cfg)
		if results == nil {
			return "", false, false
		}
		return renderHTTPReport(m, cfg, lg.describe(), time.Now(), results), slices.ContainsFunc(results, func(r *httpResult) bool { return r.skipped != "" }), true
	})
}

// planHTTP returns the HTTP cells whose workload/contender only matches,
// and whether any needs Redis.
func planHTTP(only *regexp.Regexp) (plan []httpCell, needRedis bool) {
	ws := httpWorkloads()
	cs := httpContenders()
	for i := range ws {
		for _, c := range cs {
			if only.MatchString(ws[i].id + "/" + c.name) {
				plan = append(plan, httpCell{&ws[i], c})
				needRedis = needRedis || c.redis
			}
		}
	}
	return plan, needRedis
}

// runHTTPRounds runs every cell of plan cfg.repeat times (see roundRobin)
// and returns each cell's median run by requests/s; nil when interrupted.
func runHTTPRounds(ctx context.Context, e *env, plan []httpCell, lg loadGenerator, cfg *config) []*httpResult {
	fmt.Fprintf(os.Stderr, "bench: %d HTTP cells of %v each, %d time(s), %d connections, load from %s\n", len(plan), cfg.duration, cfg.repeat, cfg.conns, lg.describe())
	runs := roundRobin(ctx, len(plan), cfg.repeat, func(i, round int) *httpResult {
		p := plan[i]
		r := runHTTPCell(ctx, e, p.w, p.c, lg, cfg.conns, cfg.duration)
		if ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "bench: [%d/%d] round %d %s/%s: %s\n", i+1, len(plan), round+1, p.w.id, p.c.name, httpProgressLine(r))
		}
		return r
	})
	if runs == nil {
		return nil
	}
	results := make([]*httpResult, len(plan))
	for i, rs := range runs {
		sorted := append([]*httpResult(nil), rs...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a].rate() < sorted[b].rate() })
		results[i] = sorted[(len(sorted)-1)/2]
	}
	return results
}

func httpProgressLine(r *httpResult) string {
	if r.skipped != "" {
		return "SKIPPED: " + r.skipped
	}
	s := fmt.Sprintf("%s requests/s, p50 %s, p99 %s, statuses 200 %d, 429 %d, other %d, errors %d",
		formatRate(r.rate()), formatLatency(r.load.P50), formatLatency(r.load.P99),
		r.statuses.ok, r.statuses.tooMany, r.statuses.other, r.load.Errors)
	if o := r.statuses.others(); o != "" {
		s += " (other: " + o + ")"
	}
	if n := r.statuses.abandoned; n > 0 {
		s += fmt.Sprintf(", %d abandoned by the client", n)
	}
	if r.load.FirstErr != "" {
		s += " (" + r.load.FirstErr + ")"
	}
	return s
}
