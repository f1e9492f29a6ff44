// Package lua holds the Redis scripts of the package store.
//
// Each algorithm lives in its own file (fixed_window.lua, sliding_log.lua,
// sliding_window.lua, token_bucket.lua, and calendar.lua for the daily,
// weekly and monthly quotas) and registers itself with the
// driver in decide.lua, which checks every limit of a request, commits to
// all or none of them, and applies the request's ban; the store joins the
// driver with the algorithms a request needs into one script, so that a
// decision is a single atomic EVALSHA. On Redis 7 and later the store
// joins all the files but check.lua into one library of Redis Functions
// instead, called with FCALL: there KEYS and ARGV are set by each call,
// and the top-level locals that hold one run's state (decide.lua's
// now_us, sliding_log.lua's charged) are reset by each call, since a
// library's chunk runs once, at load. peek.lua answers as a decision
// would, writing nothing; charge.lua brings to Redis what a fallback
// decided in process; probe.lua and check.lua test a server; reset.lua
// forgets keys. override.lua reads and changes a namespace's overrides of
// its limits, and top.lua the keys denied most, for the package admin. Each file's header states its KEYS, ARGV and reply.
package lua

import (
	"embed"
	"fmt"
)

//go:embed *.lua
var files embed.FS

// Source returns the text of the script file name, for example
// "decide.lua". It panics when there is no such file: the names are fixed
// when the module is built.
func Source(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("lua: no script %q", name))
	}
	return string(b)
}
