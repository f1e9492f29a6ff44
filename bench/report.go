package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// machine describes where the run happened.
type machine struct {
	cpu, os, goVersion, redisVersion string
	cores, gomaxprocs                int
}

func machineInfo(redisVersion string) machine {
	return machine{
		cpu:          cpuModel(),
		os:           osName(),
		goVersion:    runtime.Version(),
		redisVersion: redisVersion,
		cores:        runtime.NumCPU(),
		gomaxprocs:   runtime.GOMAXPROCS(0),
	}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + runtime.GOARCH + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown (" + runtime.GOARCH + ")"
}

func osName() string {
	name := runtime.GOOS
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				name = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		name += ", kernel " + strings.TrimSpace(string(b))
	}
	return name + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

// renderReport writes the markdown report: the machine, the table, then
// anomalies and the contenders' configuration.
func renderReport(m machine, cfg *config, results []*cellResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Rate limiter benchmark\n\n")
	writeMachine(&b, m, cfg)
	fmt.Fprintf(&b, "- %v per cell, callers %s, each cell the median of %d round(s) run round-robin over the rows, %s\n\n", cfg.duration, joinInts(cfg.callers), cfg.repeat, time.Now().UTC().Format("2006-01-02 15:04 UTC"))

	// Baseline rates by workload, callers and baseline name.
	type key struct {
		w       string
		callers int
		name    string
	}
	base := map[key]float64{}
	for _, r := range results {
		if r.contender.ours && r.skipped == "" {
			base[key{r.workload.id, r.callers, r.contender.name}] = r.rate()
		}
	}

	b.WriteString("| Workload | Contender | Family | Callers | Decisions/s | p50 | p99 | Allocs/decision | Redis CPU µs/decision | Allowed | Denied | Errors | vs ours |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		if r.skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | skipped: %s | | | | | | | | |\n",
				r.workload.id, r.contender.name, r.contender.family, r.callers, r.skipped)
			continue
		}
		vs := "n/a"
		if r.contender.ours {
			vs = "1.00"
		} else if br, ok := base[key{r.workload.id, r.callers, baselines[r.contender.family]}]; ok && br > 0 {
			vs = fmt.Sprintf("%.2f", r.rate()/br)
		}
		allocs := "n/a"
		if r.decisions > 0 {
			allocs = fmt.Sprintf("%.1f", float64(r.mallocs)/float64(r.decisions))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.workload.id, r.contender.name, r.contender.family, r.callers,
			formatRate(r.rate()), formatLatency(r.p50), formatLatency(r.p99), allocs,
			cpuPer(r.redisCPU, r.redisCPUOK, r.decisions), formatCount(r.allowed), formatCount(r.denied), formatCount(r.errors), vs)
	}

	b.WriteString("\n### Anomalies\n\n")
	anomalies := 0
	for _, r := range results {
		row := fmt.Sprintf("%s/%s, %d callers", r.workload.id, r.contender.name, r.callers)
		if r.skipped != "" {
			fmt.Fprintf(&b, "- %s: skipped: %s\n", row, r.skipped)
			anomalies++
			continue
		}
		if r.workload.exhaust != "" {
			switch {
			case r.warmupErr != nil:
				fmt.Fprintf(&b, "- %s: the warm-up call that spends the hot key failed: %v\n", row, r.warmupErr)
				anomalies++
			case !r.warmupAllowed:
				fmt.Fprintf(&b, "- %s: the warm-up call that spends the hot key was denied (expected allowed)\n", row)
				anomalies++
			}
		}
		if n := r.wrong(); n > 0 {
			what := "denied"
			if !r.workload.wantAllowed {
				what = "allowed"
			}
			why := "the workload expects none"
			if r.contender.caveat != "" {
				why = r.contender.caveat
			}
			fmt.Fprintf(&b, "- %s: %s %s of %s timed decisions (%s)\n", row, what, formatCount(n), formatCount(r.decisions), why)
			anomalies++
		}
		if r.errors > 0 {
			fmt.Fprintf(&b, "- %s: %s errors; first: %s\n", row, formatCount(r.errors), r.firstErr)
			anomalies++
		}
	}
	if anomalies == 0 {
		b.WriteString("None: no errors, every many-keys decision allowed, every hot-key decision denied.\n")
	}

	b.WriteString("\n### Notes\n\n")
	b.WriteString("- Workloads. `many-keys`: each caller walks 100,000 keys round-robin (callers start at evenly spaced offsets) under a limit of 100,000 per hour per key, so nothing should be denied. `hot-key`: every call uses one key whose limit of 1 per hour was spent by one untimed call before the cell, so every timed decision should be a denial.\n")
	b.WriteString("- Each cell: FLUSHALL (Redis rows), a fresh limiter (and, for Redis rows, a fresh go-redis client), an untimed warm-up of the same loop (a tenth of the duration, 50 ms to 500 ms), then the timed run. Latency is each call's wall time (two `time.Now()` per call, which the in-process rows feel most), kept in a log-linear histogram (≤1.6% bucket error). Allocs/decision is `runtime.MemStats.Mallocs` over the timed run divided by decisions, including go-redis's own goroutines. Redis CPU µs/decision is the server's CPU time over the timed run (`INFO cpu`, used_cpu_sys + used_cpu_user, read just before and just after) divided by decisions; blank for in-process rows.\n")
	b.WriteString("- Redis rows use `redis.NewClient` with PoolSize 128 against the same server, except go-zero, whose wrapper makes its own client (see below). Errors count returned errors plus errors a library logged instead of returning.\n")
	b.WriteString("- vs ours: decisions/s divided by that of this library's row of the same family, workload and callers: Redis fixed-window family → `ratelimit/redis/fixed-window`, Redis token-bucket family → `ratelimit/redis/token-bucket`, in-process → `ratelimit/memory/token-bucket`; this library's rows show 1.00. n/a when the baseline row did not run.\n")
	writeNotes(&b, results, func(r *cellResult) (name, family, note string) {
		return r.contender.name, r.contender.family, r.contender.note
	})
	return b.String()
}

// writeMachine writes the list items that describe the machine.
func writeMachine(b *strings.Builder, m machine, cfg *config) {
	fmt.Fprintf(b, "- CPU: %s, %d cores, GOMAXPROCS %d\n", m.cpu, m.cores, m.gomaxprocs)
	fmt.Fprintf(b, "- Go: %s\n", m.goVersion)
	fmt.Fprintf(b, "- redis-server: %s (%s)\n", m.redisVersion, redisWhere(cfg))
	fmt.Fprintf(b, "- OS: %s\n", m.os)
}

func redisWhere(cfg *config) string {
	if cfg.cluster > 0 {
		return fmt.Sprintf("a Redis Cluster of %d masters, no replicas, started by the benchmark on loopback, no persistence; Redis CPU summed over the masters", cfg.cluster)
	}
	if cfg.redisURL != "" {
		return "from -redis"
	}
	return "started by the benchmark on loopback, no persistence"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// formatCount writes n with thousands separators: 1234567 → "1,234,567".
func formatCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func formatRate(r float64) string { return formatCount(uint64(r + 0.5)) }

// formatLatency writes d with three significant digits: "812ns",
// "12.3µs", "1.25ms".
func formatLatency(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return sig3(float64(d)/1e3) + "µs"
	case d < time.Second:
		return sig3(float64(d)/1e6) + "ms"
	default:
		return sig3(d.Seconds()) + "s"
	}
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// publish prints report, writes it to out too when out is set, and
// returns the exit code: 1 when it cannot be written or a cell was
// skipped, 0 otherwise.
func publish(report, out string, skipped bool) int {
	fmt.Print(report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	if skipped {
		return 1
	}
	return 0
}

// writeNotes writes the note of each contender of results, once, in the
// order of results: "- `name` (family): note".
func writeNotes[R any](b *strings.Builder, results []R, contender func(R) (name, family, note string)) {
	seen := map[string]bool{}
	for _, r := range results {
		name, family, note := contender(r)
		if seen[name] {
			continue
		}
		seen[name] = true
		fmt.Fprintf(b, "- `%s` (%s): %s\n", name, family, note)
	}
}
