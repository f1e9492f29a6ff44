package store

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/lua"
)

// A program is one of the store's Lua programs, as a script (EVALSHA,
// EVAL) and as a function of the library (FCALL; see functions).
type program struct {
	script   *redis.Script
	source   string // the script's, for EVAL
	function string // its name in the library
	// targets are what each verb names, boxed once, not on every call.
	targets [verbs]any
}

// A programRun is one run of a program, with its KEYS and ARGV.
type programRun struct {
	program *program
	keys    []string
	args    []any
}

// The programs the Redis store runs, from the package lua.
var (
	// decideOne[a] decides a request whose single limit uses algorithm
	// a: a shorter script, which Redis compiles faster on every run. As
	// functions, both are the library's one decide, compiled at load.
	decideAny = newProgram("decide", decideSource(scriptFiles...)+"return decide()\n")
	decideOne = func() (p [len(algorithmFiles)]*program) {
		for a, file := range algorithmFiles {
			if a == int(spec.Weekly) || a == int(spec.Monthly) {
				p[a] = p[spec.Daily] // one script for the three calendars
				continue
			}
			p[a] = newProgram("decide", decideSource(file)+"return decide()\n")
		}
		return p
	}()

	// peekProgram answers a request as decideAny would, writing nothing.
	peekProgram = newProgram("peek", decideSource(scriptFiles...)+lua.Source("peek.lua")+"return peek()\n")

	chargeProgram = newProgram("charge", decideSource(scriptFiles...)+lua.Source("charge.lua")+"return charge()\n")
	endProgram    = newProgram("end", decideSource(scriptFiles...)+lua.Source("end.lua")+"return end_request()\n")
	renewProgram  = newProgram("renew", lua.Source("decide.lua")+lua.Source("renew.lua")+"return renew()\n")
	resetProgram  = newProgram("reset", lua.Source("reset.lua"))
	probeProgram  = newProgram("probe", lua.Source("probe.lua"))

	// The programs of the package admin, run through Overrides.
	overrideProgram = newProgram("override", lua.Source("override.lua"))
	topProgram      = newProgram("top", lua.Source("top.lua"))

	// Check runs these as scripts: they check what EVAL needs.
	probeScript = probeProgram.script
	checkScript = redis.NewScript(lua.Source("check.lua"))
)

// algorithmFiles holds each algorithm's script, by its spec code.
var algorithmFiles = [...]string{
	spec.SlidingWindow: "sliding_window.lua",
	spec.FixedWindow:   "fixed_window.lua",
	spec.SlidingLog:    "sliding_log.lua",
	spec.TokenBucket:   "token_bucket.lua",
	spec.Daily:         "calendar.lua",
	spec.Weekly:        "calendar.lua",
	spec.Monthly:       "calendar.lua",
	spec.Concurrent:    "concurrent.lua",
}

// scriptFiles lists each algorithm's script once.
var scriptFiles = append(algorithmFiles[:spec.Daily+1:spec.Daily+1], algorithmFiles[spec.Concurrent])

func newProgram(function, script string) *program {
	p := &program{script: redis.NewScript(script), source: script, function: library.name + "_" + function}
	p.targets = [verbs]any{fcallVerb: p.function, evalShaVerb: p.script.Hash(), evalVerb: p.source}
	return p
}

func decideSource(files ...string) string {
	s := lua.Source("decide.lua")
	for _, f := range files {
		s += lua.Source(f)
	}
	return s
}

// library is the store's library of Redis Functions, built from the same
// files as the scripts. Its name and its functions' (one namespace for all
// libraries) carry a hash of its text, so that two versions side by side,
// as in a rolling deploy, each call their own code.
var library = newLibrary()

type functionLibrary struct {
	name   string // ratelimit_ and the first 16 hex digits of the SHA-1 of its text
	source string // for FUNCTION LOAD
}

// libraryPerCall lists the top-level locals of the library's files that
// hold state of one run: a library's locals outlive the call, so each
// function call resets them (TestLibraryState checks the list).
var libraryPerCall = []string{"now_us", "charged"}

// libraryFiles are the files of the library, in order; it wraps each of
// wrappedFiles, whose chunk is their body, in a local function.
var libraryFiles = append(append([]string{"decide.lua"}, scriptFiles...), "peek.lua", "charge.lua", "end.lua", "renew.lua", "reset.lua", "probe.lua", "override.lua", "top.lua")

var wrappedFiles = []string{"reset.lua", "probe.lua", "override.lua", "top.lua"}

// libraryTemplate is the library with {{library}} for its name.
func libraryTemplate() string {
	var b strings.Builder
	b.WriteString("#!lua name={{library}}\n")
	b.WriteString("-- The ratelimit store's library: the store's scripts as Redis Functions.\n")
	b.WriteString("-- A function gets its keys and arguments as parameters, not as globals,\n")
	b.WriteString("-- and may not set a global: each call sets these, which the files read.\n")
	b.WriteString("local KEYS, ARGV\n")
	for _, f := range libraryFiles {
		if slices.Contains(wrappedFiles, f) {
			name := strings.TrimSuffix(f, ".lua")
			b.WriteString("local function " + name + "()\n" + lua.Source(f) + "end\n")
		} else {
			b.WriteString(lua.Source(f))
		}
	}
	b.WriteString(`
-- entry returns f as a function of the library: it starts each call with
-- its keys and arguments and a fresh state of the run.
local function entry(f)
  return function(keys, args)
    KEYS, ARGV = keys, args
    ` + strings.Join(libraryPerCall, ", ") + ` = ` + strings.Repeat("0, ", len(libraryPerCall)-1) + `0
    return f()
  end
end

redis.register_function('{{library}}_decide', entry(decide))
redis.register_function{function_name = '{{library}}_peek', callback = entry(peek), flags = {'no-writes'}}
redis.register_function('{{library}}_charge', entry(charge))
redis.register_function('{{library}}_end', entry(end_request))
redis.register_function('{{library}}_renew', entry(renew))
-- DEL frees memory: a reset may run while Redis is out of memory, as with EVAL.
redis.register_function{function_name = '{{library}}_reset', callback = entry(reset), flags = {'allow-oom'}}
redis.register_function('{{library}}_probe', entry(probe))
redis.register_function('{{library}}_override', entry(override))
redis.register_function('{{library}}_top', entry(top))
`)
	return b.String()
}

func newLibrary() *functionLibrary {
	text := libraryTemplate()
	sum := sha1.Sum([]byte(text))
	name := "ratelimit_" + hex.EncodeToString(sum[:8])
	return &functionLibrary{name: name, source: strings.ReplaceAll(text, "{{library}}", name)}
}
