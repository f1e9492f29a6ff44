package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// renderHTTPReport writes the markdown report of -http: the machine and
// load generator, the table, then anomalies and the contenders'
// configuration.
func renderHTTPReport(m machine, cfg *config, loadgen string, now time.Time, results []*httpResult) string {
	var b strings.Builder
	b.WriteString("## Rate limiter benchmark, HTTP level\n\n")
	writeMachine(&b, m, cfg)
	fmt.Fprintf(&b, "- Load: %s; %d keep-alive connections, on the same machine\n", loadgen, cfg.conns)
	fmt.Fprintf(&b, "- %v per cell, each cell the median of %d round(s) run round-robin over the rows, %s\n\n", cfg.duration, cfg.repeat, now.UTC().Format("2006-01-02 15:04 UTC"))

	// Rates by workload and row name, for the ratios.
	type key struct{ w, name string }
	rates := map[key]float64{}
	for _, r := range results {
		if r.skipped == "" {
			rates[key{r.workload.id, r.contender.name}] = r.rate()
		}
	}
	ratio := func(r *httpResult, base string) string {
		if br, ok := rates[key{r.workload.id, base}]; ok && br > 0 {
			return fmt.Sprintf("%.2f", r.rate()/br)
		}
		return "n/a"
	}

	b.WriteString("| Workload | Contender | Family | Requests/s | p50 | p99 | 200 | 429 | Other status | Errors | Redis CPU µs/request | Load generator CPU (cores) | vs none | vs ours |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		c := r.contender
		if r.skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | skipped: %s | | | | | | | | | | |\n", r.workload.id, c.name, c.family, r.skipped)
			continue
		}
		vsOurs := ""
		if base, ok := httpBaselines[c.family]; ok {
			vsOurs = ratio(r, base)
		}
		loadCPU := "n/a"
		if r.load.Elapsed > 0 {
			loadCPU = fmt.Sprintf("%.2f", r.load.CPU.Seconds()/r.load.Elapsed.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.workload.id, c.name, c.family,
			formatRate(r.rate()), formatLatency(r.load.P50), formatLatency(r.load.P99),
			formatCount(r.statuses.ok), formatCount(r.statuses.tooMany), formatCount(r.statuses.other), formatCount(r.load.Errors),
			cpuPer(r.redisCPU, r.redisCPUOK, r.statuses.total()), loadCPU,
			ratio(r, "none"), vsOurs)
	}

	b.WriteString("\n### Anomalies\n\n")
	anomalies := 0
	for _, r := range results {
		row := r.workload.id + "/" + r.contender.name
		if r.skipped != "" {
			fmt.Fprintf(&b, "- %s: skipped: %s\n", row, r.skipped)
			anomalies++
			continue
		}
		if r.workload.exhaust {
			switch {
			case r.exhaustErr != nil:
				fmt.Fprintf(&b, "- %s: the request that spends the hot key failed: %v\n", row, r.exhaustErr)
				anomalies++
			case r.exhaustStatus != http.StatusOK:
				fmt.Fprintf(&b, "- %s: the request that spends the hot key got %d (expected 200)\n", row, r.exhaustStatus)
				anomalies++
			}
		}
		if n := r.wrong(); n > 0 {
			fmt.Fprintf(&b, "- %s: %s of %s timed responses were not %d", row, formatCount(n), formatCount(r.statuses.total()), r.workload.want(r.contender))
			if o := r.statuses.others(); o != "" {
				fmt.Fprintf(&b, "; statuses other than 200 and 429: %s", o)
			}
			b.WriteString("\n")
			anomalies++
		}
		if r.load.Errors > 0 {
			fmt.Fprintf(&b, "- %s: %s load generator errors; %s\n", row, formatCount(r.load.Errors), r.load.FirstErr)
			anomalies++
		}
	}
	if anomalies == 0 {
		b.WriteString("None: no errors, every many-keys and hot-key-allowed response 200, every hot-key response 429 (200 from the bare handler).\n")
	}

	ws := httpWorkloads()
	b.WriteString("\n### Notes\n\n")
	fmt.Fprintf(&b, "- Workloads. `%s`: requests spread over %s keys (header `%s: %s00000` …), each connection walking them round-robin from an evenly spaced start, under a limit of %s per key, so every response should be 200. `%s`: every request carries the key `%s`, under a limit of %s that the run never spends, so every response should be 200. `%s`: every request carries the key `%s`, whose limit of %s was spent by one untimed request before the cell, so every response should be 429.\n",
		ws[0].id, formatCount(uint64(ws[0].keys)), keyHeader, ws[0].prefix, describeLimit(ws[0].limit),
		ws[1].id, ws[1].prefix, describeLimit(ws[1].limit),
		ws[2].id, ws[2].prefix, describeLimit(ws[2].limit))
	b.WriteString("- Each cell: FLUSHALL (Redis rows), a fresh middleware (and go-redis client, PoolSize 128) in front of a handler writing 200 `hello`, a fresh `net/http` server on 127.0.0.1, an untimed warm-up by the Go load generator (a tenth of the duration, 50 ms to 500 ms), then the timed load. The server, Redis and the load generator share the machine.\n")
	b.WriteString("- 200, 429, Other status: the statuses the server wrote during the timed load, counted around the middleware; requests whose client went away before the answer (in flight when the load generator exited) are not counted. Errors: the load generator's connect, read and write errors and timeouts. p50, p99: the load generator's latency of one request. Redis CPU µs/request: the server's `INFO cpu` (used_cpu_sys + used_cpu_user) over the timed load divided by the responses counted. Load generator CPU: its process's user + system time divided by the load's duration.\n")
	b.WriteString("- vs none: requests/s divided by the bare handler's in the same workload. vs ours: divided by `ratelimit/redis/fixed-window` for Redis rows, `ratelimit/memory/fixed-window` for in-process rows (our other algorithms compared to our fixed window likewise). Above 1 the row is faster.\n")
	writeNotes(&b, results, func(r *httpResult) (name, family, note string) {
		return r.contender.name, r.contender.family, r.contender.note
	})
	return b.String()
}
