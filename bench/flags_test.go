package main

import (
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
