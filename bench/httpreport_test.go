package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// httpRow is a result of the HTTP table made by hand.
func httpRow(t *testing.T, w *httpWorkload, name string, rps int, statuses map[int]uint64, cpu time.Duration) *httpResult {
	t.Helper()
	var c *httpContender
	for _, x := range httpContenders() {
		if x.name == name {
			c = x
		}
	}
	if c == nil {
		t.Fatalf("no HTTP contender %q", name)
	}
	r := &httpResult{workload: w, contender: c, exhaustStatus: http.StatusOK}
	r.load = loadResult{Requests: uint64(rps) * 2, Elapsed: 2 * time.Second, P50: time.Millisecond, P99: 5 * time.Millisecond, CPU: time.Second}
	for code, n := range statuses {
		r.statuses.codes[code] = n
	}
	r.statuses.sum()
	if c.redis {
		r.redisCPU, r.redisCPUOK = cpu, true
	}
	return r
}

func TestRenderHTTPReport(t *testing.T) {
	ws := httpWorkloads()
	many, hot := &ws[0], &ws[2]
	results := []*httpResult{
		httpRow(t, many, "none", 50_000, map[int]uint64{200: 100_000}, 0),
		httpRow(t, many, "ratelimit/redis/fixed-window", 25_000, map[int]uint64{200: 50_000}, time.Second),
		httpRow(t, many, "ulule/limiter", 20_000, map[int]uint64{200: 39_000, 503: 1000}, 2*time.Second),
		httpRow(t, many, "go-chi/httprate", 40_000, map[int]uint64{200: 80_000}, 0),
		httpRow(t, hot, "none", 40_000, map[int]uint64{200: 80_000}, 0),
		httpRow(t, hot, "ratelimit/redis/fixed-window", 30_000, map[int]uint64{429: 60_000}, 0),
		httpRow(t, hot, "ratelimit/memory/fixed-window", 36_000, map[int]uint64{429: 72_000}, 0),
		httpRow(t, hot, "go-chi/httprate", 18_000, map[int]uint64{429: 35_990, 200: 10}, 0),
		httpRow(t, hot, "ulule/limiter", 0, nil, 0),
	}
	results[len(results)-1].skipped = "setup failed: boom"
	cfg := &config{duration: 2 * time.Second, repeat: 1, conns: 64}
	m := machine{cpu: "Test CPU", os: "TestOS", goVersion: "go0", redisVersion: "7.0.0", cores: 2, gomaxprocs: 2}
	got := renderHTTPReport(m, cfg, "wrk 4.1.0, 2 threads", time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC), results)

	for _, want := range []string{
		"- CPU: Test CPU, 2 cores, GOMAXPROCS 2\n",
		"- Load: wrk 4.1.0, 2 threads; 64 keep-alive connections, on the same machine\n",
		"2026-11-24 13:00 UTC\n",
		"| Workload | Contender | Family | Requests/s | p50 | p99 | 200 | 429 | Other status | Errors | Redis CPU µs/request | Load generator CPU (cores) | vs none | vs ours |\n",
		"| many-keys | none | none | 50,000 | 1.00ms | 5.00ms | 100,000 | 0 | 0 | 0 |  | 0.50 | 1.00 |  |\n",
		// 1s of Redis CPU over 50,000 responses: 20 µs each.
		"| many-keys | ratelimit/redis/fixed-window | redis | 25,000 | 1.00ms | 5.00ms | 50,000 | 0 | 0 | 0 | 20.0 | 0.50 | 0.50 | 1.00 |\n",
		"| many-keys | ulule/limiter | redis | 20,000 | 1.00ms | 5.00ms | 39,000 | 0 | 1,000 | 0 | 50.0 | 0.50 | 0.40 | 0.80 |\n",
		// No in-process baseline in this run.
		"| many-keys | go-chi/httprate | in-process | 40,000 | 1.00ms | 5.00ms | 80,000 | 0 | 0 | 0 |  | 0.50 | 0.80 | n/a |\n",
		"| hot-key | ratelimit/redis/fixed-window | redis | 30,000 | 1.00ms | 5.00ms | 0 | 60,000 | 0 | 0 | 0.00 | 0.50 | 0.75 | 1.00 |\n",
		"| hot-key | go-chi/httprate | in-process | 18,000 | 1.00ms | 5.00ms | 10 | 35,990 | 0 | 0 |  | 0.50 | 0.45 | 0.50 |\n",
		"| hot-key | ulule/limiter | redis | skipped: setup failed: boom |",
		"- many-keys/ulule/limiter: 1,000 of 40,000 timed responses were not 200; statuses other than 200 and 429: 503 ×1,000\n",
		"- hot-key/go-chi/httprate: 10 of 36,000 timed responses were not 429\n",
		"- hot-key/ulule/limiter: skipped: setup failed: boom\n",
		"under a limit of 100,000 per hour per key",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "many-keys/none:") || strings.Contains(got, "hot-key/none:") {
		t.Errorf("the bare handler's 200s are reported as anomalies:\n%s", got)
	}
	// Every table row has the header's number of cells.
	cells := regexp.MustCompile(`\|`)
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "| ") {
			if n := len(cells.FindAllString(line, -1)); n != 15 {
				t.Errorf("row with %d bars, want 15: %s", n, line)
			}
		}
	}
}

// TestStatusCounts checks the counts the server keeps: a handler that
// writes nothing sends 200, the first status written counts, and a
// snapshot difference counts only what came between.
func TestStatusCounts(t *testing.T) {
	var s statusCounts
	h := s.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/deny":
			http.Error(w, "no", http.StatusTooManyRequests)
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/write":
			_, _ = w.Write(helloBody)
		}
	}))
	serve := func(path string) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	serve("/write")
	before := s.snapshot()
	for _, p := range []string{"/", "/write", "/deny", "/deny", "/fail"} {
		serve(p)
	}
	// A request whose client has gone is not counted by status.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fail", nil).WithContext(ctx))
	got := s.snapshot().sub(before)
	if got.ok != 2 || got.tooMany != 2 || got.other != 1 || got.total() != 5 || got.abandoned != 1 {
		t.Errorf("got 200 %d, 429 %d, other %d, abandoned %d, want 2, 2, 1, 1", got.ok, got.tooMany, got.other, got.abandoned)
	}
	if o := got.others(); o != "503 ×1" {
		t.Errorf("others: got %q, want %q", o, "503 ×1")
	}
}
