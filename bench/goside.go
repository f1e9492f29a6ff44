package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The -goside run: what this library's Go side costs per request against
// the cheapest peers, side by side in one run. The HTTP cells go through
// each library's own net/http middleware on one loopback server, with the
// default headers; the decision cells call the limiters directly.

// goSideHTTP and goSideDecisions select the cells of -goside.
var (
	goSideHTTP      = regexp.MustCompile(`^(many-keys/(none|ratelimit/memory/fixed-window|go-chi/httprate|ratelimit/redis/fixed-window|ulule/limiter)|hot-key/(none|ratelimit/memory/fixed-window|ratelimit/redis/fixed-window|go-chi/httprate))$`)
	goSideDecisions = regexp.MustCompile(`^many-keys/(ratelimit/redis/token-bucket|go-redis/redis_rate|go-redis/redis_rate,autopipeliner)$`)
	goSideCallers   = []int{8, 64}
)

// A goSideTarget is one goal: ours at least goal times base, in workload.
type goSideTarget struct {
	what       string
	http       bool
	workload   string
	ours, base string
	callers    int // decision cells
	goal       float64
}

var goSideTargets = []goSideTarget{
	{what: "HTTP, Memory store against go-chi/httprate's in-memory limiter, many keys", http: true, workload: "many-keys", ours: "ratelimit/memory/fixed-window", base: "go-chi/httprate", goal: 1.1},
	{what: "HTTP, spent hot key on the Memory store against the bare handler's 200", http: true, workload: "hot-key", ours: "ratelimit/memory/fixed-window", base: "none", goal: 0.9},
	{what: "HTTP, spent hot key on the Redis store (deny cache) against the bare handler's 200", http: true, workload: "hot-key", ours: "ratelimit/redis/fixed-window", base: "none", goal: 0.9},
	{what: "HTTP, Redis store against ulule/limiter, many keys", http: true, workload: "many-keys", ours: "ratelimit/redis/fixed-window", base: "ulule/limiter", goal: 1.3},
	{what: "Decisions, token bucket against go-redis/redis_rate on the AutoPipeliner, 64 callers", workload: "many-keys", ours: "ratelimit/redis/token-bucket", base: "go-redis/redis_rate,autopipeliner", callers: 64, goal: 1.3},
	{what: "Decisions, token bucket against go-redis/redis_rate on the AutoPipeliner, 8 callers", workload: "many-keys", ours: "ratelimit/redis/token-bucket", base: "go-redis/redis_rate,autopipeliner", callers: 8, goal: 1.3},
	{what: "Decisions, token bucket against plain go-redis/redis_rate, 8 callers", workload: "many-keys", ours: "ratelimit/redis/token-bucket", base: "go-redis/redis_rate", callers: 8, goal: 1.3},
}

// runGoSide is -goside: the HTTP cells, then the decision cells, on one
// redis-server (or -redis), then the targets table and both reports.
func runGoSide(ctx context.Context, stop context.CancelFunc, cfg *config) int {
	lg, err := chooseLoadGenerator(cfg.loadgen, cfg.conns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	httpPlan, _ := planHTTP(goSideHTTP)
	dcfg := *cfg
	dcfg.callers = goSideCallers
	decisionPlan, _ := planCells(&dcfg, goSideDecisions)
	return runReport(ctx, stop, cfg, true, func(e *env, m machine) (string, bool, bool) {
		httpResults := runHTTPRounds(ctx, e, httpPlan, lg, cfg)
		var decisionResults []*cellResult
		if httpResults != nil {
			decisionResults = runRounds(ctx, e, decisionPlan, &dcfg)
		}
		if decisionResults == nil {
			return "", false, false
		}
		report := renderGoSide(httpResults, decisionResults) +
			"\n" + renderHTTPReport(m, cfg, lg.describe(), time.Now(), httpResults) +
			"\n" + renderReport(m, &dcfg, decisionResults)
		return report, slices.ContainsFunc(httpResults, func(r *httpResult) bool { return r.skipped != "" }) ||
			slices.ContainsFunc(decisionResults, func(r *cellResult) bool { return r.skipped != "" }), true
	})
}

// renderGoSide writes the table of goSideTargets: each goal, the two
// rates and their ratio.
func renderGoSide(httpResults []*httpResult, decisionResults []*cellResult) string {
	type key struct {
		w, name string
		callers int
	}
	rates := map[key]float64{}
	for _, r := range httpResults {
		if r.skipped == "" {
			rates[key{"http/" + r.workload.id, r.contender.name, 0}] = r.rate()
		}
	}
	for _, r := range decisionResults {
		if r.skipped == "" {
			rates[key{r.workload.id, r.contender.name, r.callers}] = r.rate()
		}
	}
	var b strings.Builder
	b.WriteString("## The Go side per request against the peers\n\n")
	b.WriteString("| Target | Ours /s | Against /s | Ratio | Goal | Met |\n|---|--:|--:|--:|--:|---|\n")
	for _, t := range goSideTargets {
		w := t.workload
		if t.http {
			w = "http/" + w
		}
		ours, okOurs := rates[key{w, t.ours, t.callers}]
		base, okBase := rates[key{w, t.base, t.callers}]
		if !okOurs || !okBase || base == 0 {
			fmt.Fprintf(&b, "| %s | | | n/a | %.1f× | not measured |\n", t.what, t.goal)
			continue
		}
		ratio := ours / base
		met := "no"
		if ratio >= t.goal {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | **%.2f×** | %.1f× | %s |\n", t.what, formatRate(ours), formatRate(base), ratio, t.goal, met)
	}
	return b.String()
}
