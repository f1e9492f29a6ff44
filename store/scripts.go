package store

import (
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/lua"
)

// The scripts the Redis store runs, from the package lua. Each is sent
// with EVALSHA, and with EVAL when Redis does not have it yet.
var (
	// decideAny decides a request whose limits use any algorithms;
	// decideOne[a] one whose single limit uses algorithm a: a shorter
	// script, which Redis compiles faster on every run.
	decideAny = redis.NewScript(decideSource(algorithmFiles[:]...) + "return decide()\n")
	decideOne [4]*redis.Script

	// peekScript answers a request as decideAny would, writing nothing.
	peekScript = redis.NewScript(decideSource(algorithmFiles[:]...) + lua.Source("peek.lua") + "return peek()\n")

	chargeScript = redis.NewScript(decideSource(algorithmFiles[:]...) + lua.Source("charge.lua") + "return charge()\n")
	probeScript  = redis.NewScript(lua.Source("probe.lua"))
	checkScript  = redis.NewScript(lua.Source("check.lua"))
	resetScript  = redis.NewScript(lua.Source("reset.lua"))
)

// algorithmFiles holds each algorithm's script, by its spec code.
var algorithmFiles = [4]string{
	spec.SlidingWindow: "sliding_window.lua",
	spec.FixedWindow:   "fixed_window.lua",
	spec.SlidingLog:    "sliding_log.lua",
	spec.TokenBucket:   "token_bucket.lua",
}

func init() {
	for a, file := range algorithmFiles {
		decideOne[a] = redis.NewScript(decideSource(file) + "return decide()\n")
	}
}

// decideSource joins decide.lua and the algorithms' files.
func decideSource(files ...string) string {
	s := lua.Source("decide.lua")
	for _, f := range files {
		s += lua.Source(f)
	}
	return s
}
