package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseFlagsCluster(t *testing.T) {
	cfg, err := parseFlags([]string{"-cluster", "3", "-only", "many-keys/"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.cluster != 3 {
		t.Errorf("cluster = %d, want 3", cfg.cluster)
	}
	if !strings.Contains(redisWhere(cfg), "Cluster of 3 masters") {
		t.Errorf("the report's Redis line %q does not name the cluster", redisWhere(cfg))
	}
	for _, args := range [][]string{
		{"-cluster", "-1"},
		{"-cluster", "3", "-http"},
		{"-cluster", "3", "-redis", "redis://127.0.0.1:6379/0"},
	} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), "-cluster") {
			t.Errorf("parseFlags(%q) = %v, want an error naming -cluster", args, err)
		}
	}
}

func TestClusterRowsAreOurs(t *testing.T) {
	n := 0
	for _, c := range contenders() {
		if !c.cluster {
			continue
		}
		n++
		if !c.redis || !strings.HasPrefix(c.name, "ratelimit/redis/") || strings.Contains(c.name, "autopipeliner") {
			t.Errorf("row %s runs on -cluster, but only this library's Redis rows without the AutoPipeliner can", c.name)
		}
	}
	if n == 0 {
		t.Error("no row runs on -cluster")
	}
}

// TestGoSidePlan checks that -goside's cells exist, so that every target
// of its table has both of its rows, and that it refuses the flags that
// choose cells.
func TestGoSidePlan(t *testing.T) {
	httpPlan, needRedis := planHTTP(goSideHTTP)
	if !needRedis {
		t.Error("-goside's HTTP cells need no Redis, but the Redis store and ulule are among them")
	}
	cfg := &config{callers: goSideCallers}
	decisionPlan, _ := planCells(cfg, goSideDecisions)
	have := map[string]bool{}
	for _, c := range httpPlan {
		have["http/"+c.w.id+"/"+c.c.name] = true
	}
	for _, c := range decisionPlan {
		have[fmt.Sprintf("%s/%s/%d", c.w.id, c.c.name, c.callers)] = true
	}
	for _, g := range goSideTargets {
		for _, row := range []string{g.ours, g.base} {
			k := g.workload + "/" + row
			if g.http {
				k = "http/" + k
			} else {
				k = fmt.Sprintf("%s/%d", k, g.callers)
			}
			if !have[k] {
				t.Errorf("target %q: -goside runs no cell %s", g.what, k)
			}
		}
	}
	for _, args := range [][]string{{"-goside", "-http"}, {"-goside", "-leased"}, {"-goside", "-only", "x"}} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), "-goside") {
			t.Errorf("parseFlags(%q) = %v, want an error naming -goside", args, err)
		}
	}
}
