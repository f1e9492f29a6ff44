package lua

import (
	"strings"
	"testing"
)

func TestSource(t *testing.T) {
	for _, name := range []string{"decide.lua", "fixed_window.lua", "sliding_log.lua", "sliding_window.lua", "token_bucket.lua", "charge.lua", "peek.lua", "probe.lua", "check.lua", "reset.lua"} {
		if src := Source(name); !strings.HasPrefix(src, "-- "+name+":") {
			t.Errorf("Source(%q) starts %q, want the file's header comment", name, src[:min(len(src), 40)])
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Source of a missing file: no panic, want one")
		}
	}()
	Source("missing.lua")
}
