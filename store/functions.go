package store

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/wait"
)

// functionCaller is the part of a go-redis client that calls Redis
// Functions; a custom RedisClient without it runs scripts.
type functionCaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoad(ctx context.Context, code string) *redis.StringCmd
}

// The paths a store's programs take.
const (
	pathUntried   int32 = iota // functions, until the first call tells
	pathFunctions              // functions: a call succeeded
	pathScripts                // scripts: Redis or its user has no functions
)

// functions runs a store's programs as functions, whose library runs its
// chunk once, at load, or as scripts, which run it on every call (see
// docs/managed-redis.md#redis-functions).
type functions struct {
	logger *slog.Logger
	path   atomic.Int32
	// pinned keeps path as it is, whatever Redis answers (tests).
	pinned bool

	mu sync.Mutex
	// loads under way, by client, shared by the calls that need them.
	loads map[RedisClient]*libraryLoad
}

type libraryLoad struct {
	done    chan struct{} // closed when err and refused are set
	err     error
	refused bool // Redis or its user refused FUNCTION LOAD
}

func newFunctions(c RedisClient, logger *slog.Logger) *functions {
	f := &functions{logger: logger, loads: make(map[RedisClient]*libraryLoad)}
	if _, ok := c.(functionCaller); !ok {
		f.path.Store(pathScripts)
		logger.LogAttrs(context.Background(), slog.LevelDebug, "ratelimit: the Redis client does not call Redis Functions; running scripts with EVALSHA")
	}
	return f
}

func (f *functions) useFunctions() bool { return f.path.Load() != pathScripts }

// run runs r's program through c, as a function while f says so, else as
// a script. It is sent once, and again (up to maxSendAgain times) only
// when Redis's answer proves that it did not run (see notRun).
func (f *functions) run(ctx context.Context, c RedisClient, r programRun) *redis.Cmd {
	for again := 0; ; again++ {
		cmd := f.runOnce(ctx, c, r)
		if again == maxSendAgain || !notRun(cmd.Err()) || pause(ctx, again) != nil {
			return settle(ctx, cmd)
		}
	}
}

func (f *functions) runOnce(ctx context.Context, c RedisClient, r programRun) *redis.Cmd {
	if _, ok := c.(functionCaller); !ok || !f.useFunctions() {
		return runScript(ctx, c, r)
	}
	cmd := send(ctx, c, fcallVerb, r)
	if functionMissing(cmd.Err()) {
		if _, err := f.loadShared(ctx, c); err != nil {
			return runScript(ctx, c, r)
		}
		if cmd = send(ctx, c, fcallVerb, r); functionMissing(cmd.Err()) {
			return runScript(ctx, c, r) // missing again: flushed meanwhile
		}
	}
	if f.refuse(cmd.Err()) {
		return runScript(ctx, c, r) // the call did not run
	}
	if cmd.Err() == nil {
		f.worked()
	}
	return cmd
}

// onceCmd is a command that go-redis sends at most once, whatever its
// client's MaxRetries, so that a decision whose answer was lost does not
// count twice (see docs/production.md#sent-once); a pipeline that holds
// one is never resent either.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

const maxSendAgain = 3 // resends of a program that provably did not run

// notRun reports whether err is Redis refusing a command before running
// it: loading, a replica, a cluster not ready. A lost connection or a
// timeout proves nothing; a failed dial go-redis already retried.
func notRun(err error) bool {
	return err != nil && (redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsMasterDownError(err) ||
		redis.IsClusterDownError(err) || redis.IsTryAgainError(err))
}

// settle gives cmd ctx's error when cmd failed on the network after ctx
// ended or passed its deadline, keeping a network error that is not a
// timeout as its cause.
func settle(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	err := cmd.Err()
	if err == nil {
		return cmd
	}
	var ne net.Error // declared here: it escapes, and would cost every call
	if !errors.As(err, &ne) {
		return cmd
	}
	if cerr := ctx.Err(); cerr != nil && !ne.Timeout() {
		cmd.SetErr(&cutShort{ctx: cerr, cause: err})
	} else if cerr != nil {
		cmd.SetErr(cerr)
	} else if dl, ok := ctx.Deadline(); ok && ne.Timeout() && !time.Now().Before(dl) {
		cmd.SetErr(context.DeadlineExceeded)
	}
	return cmd
}

// cutShort is a call that ctx ended after the network failed it.
type cutShort struct{ ctx, cause error }

func (e *cutShort) Error() string { return e.ctx.Error() + " (after: " + e.cause.Error() + ")" }

func (e *cutShort) Unwrap() []error { return []error{e.ctx, e.cause} }

// pause waits before the again-th resend as go-redis would, or until ctx ends.
func pause(ctx context.Context, again int) error {
	d := 8 * time.Millisecond << again
	return wait.For(ctx, min(d/2+rand.N(d/2+1), 512*time.Millisecond))
}

// A verb is how a program is run: FCALL, EVALSHA or EVAL.
type verb int

const (
	fcallVerb verb = iota
	evalShaVerb
	evalVerb
	verbs
)

// verbNames are the verbs' commands, boxed once.
var verbNames = [verbs]any{fcallVerb: "fcall", evalShaVerb: "evalsha", evalVerb: "eval"}

// send sends r's program as v says through c, a client or a pipeline, at
// most once; a client without Process retries as it does.
func send(ctx context.Context, c any, v verb, r programRun) *redis.Cmd {
	p, keys, args := r.program, r.keys, r.args
	pc, ok := c.(interface { // every go-redis client and pipeline
		Process(ctx context.Context, cmd redis.Cmder) error
	})
	if !ok {
		switch s, _ := c.(redis.Scripter); v {
		case evalShaVerb:
			return s.EvalSha(ctx, p.script.Hash(), keys, args...)
		case evalVerb:
			return s.Eval(ctx, p.source, keys, args...)
		default:
			return c.(functionCaller).FCall(ctx, p.function, keys, args...)
		}
	}
	all := make([]any, 3, 3+len(keys)+len(args))
	all[0], all[1], all[2] = verbNames[v], p.targets[v], len(keys)
	for _, k := range keys {
		all = append(all, k)
	}
	cmd := redis.NewCmd(ctx, append(all, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = pc.Process(ctx, onceCmd{cmd})
	return cmd
}

// runScript runs r's program with EVALSHA, then EVAL if Redis lacks it.
func runScript(ctx context.Context, c RedisClient, r programRun) *redis.Cmd {
	cmd := send(ctx, c, evalShaVerb, r)
	if noScript(cmd.Err()) {
		return send(ctx, c, evalVerb, r)
	}
	return cmd
}

// noScript reports whether err says Redis lacks the script: it did not run.
func noScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

func (f *functions) worked() {
	if f.path.CompareAndSwap(pathUntried, pathFunctions) {
		f.logger.LogAttrs(context.Background(), slog.LevelDebug, "ratelimit: calling Redis Functions with FCALL", slog.String("library", library.name))
	}
}

// refuse reports whether err is Redis refusing FCALL or FUNCTION LOAD;
// unless f is pinned, programs then run as scripts, logged once.
func (f *functions) refuse(err error) bool {
	msg, level, ok := refusal(err)
	if !ok || f.pinned {
		return false
	}
	if f.path.Swap(pathScripts) != pathScripts {
		why := "ratelimit: Redis has no Redis Functions (before Redis 7, or FCALL or FUNCTION renamed away); running scripts with EVALSHA"
		if level == slog.LevelInfo {
			why = "ratelimit: the ACL user may not run FCALL or FUNCTION LOAD; running scripts with EVALSHA (with +fcall and +function|load, the store calls Redis Functions, which spend less of Redis's CPU)"
		}
		f.logger.LogAttrs(context.Background(), level, why, slog.String("library", library.name), slog.String("error", msg))
	}
	return true
}

// refusal reports whether err is Redis refusing FCALL or FUNCTION LOAD:
// an unknown command, logged at DEBUG, or one the ACL user may not run, at
// INFO; not a key or a command the function calls, refused otherwise and
// maybe after the function's writes.
func refusal(err error) (msg string, level slog.Level, ok bool) {
	msg, ok = replyText(err)
	switch {
	case !ok:
	case strings.HasPrefix(msg, "ERR unknown command"):
		return msg, slog.LevelDebug, true
	case strings.HasPrefix(msg, "NOPERM") && (strings.Contains(msg, "'fcall'") || strings.Contains(msg, "'function|load'")):
		return msg, slog.LevelInfo, true
	}
	return "", 0, false
}

func functionMissing(err error) bool {
	msg, ok := replyText(err)
	return ok && strings.HasPrefix(msg, "ERR Function not found")
}

func replyText(err error) (string, bool) {
	if err == nil {
		return "", false // before errors.As, whose target escapes
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return "", false
	}
	return reply.Error(), true
}

// loadShared loads the library through c, sharing a load under way.
// refused reports that Redis refused it: programs now run as scripts.
func (f *functions) loadShared(ctx context.Context, c RedisClient) (refused bool, err error) {
	f.mu.Lock()
	l := f.loads[c]
	if l == nil {
		l = &libraryLoad{done: make(chan struct{})}
		f.loads[c] = l
		f.mu.Unlock()
		l.err = loadLibrary(ctx, c)
		l.refused = f.refuse(l.err)
		f.mu.Lock()
		delete(f.loads, c)
		f.mu.Unlock()
		close(l.done)
		return l.refused, l.err
	}
	f.mu.Unlock()
	select {
	case <-l.done:
		return l.refused, l.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// loadLibrary loads the library through c, on every master of a Redis
// Cluster (returning only a refusal: a master that failed otherwise fails
// the call that follows) and on every shard of a Ring.
func loadLibrary(ctx context.Context, c RedisClient) error {
	each := func(ctx context.Context, c *redis.Client) error {
		return loaded(c.FunctionLoad(ctx, library.source).Err())
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var refused error
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			err := each(ctx, m)
			if _, _, ok := refusal(err); ok {
				mu.Lock()
				refused = err
				mu.Unlock()
			}
			return nil
		})
		if refused != nil {
			return refused
		}
		return err // no map of the slots
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	case functionCaller:
		return loaded(c.FunctionLoad(ctx, library.source).Err())
	}
	return errors.New("ratelimit: the Redis client does not call Redis Functions")
}

// loaded is FUNCTION LOAD's error, nil when the library (its name says
// its version) was there already.
func loaded(err error) error {
	if msg, _ := replyText(err); strings.HasPrefix(msg, "ERR Library") && strings.HasSuffix(msg, "already exists") {
		return nil
	}
	return err
}
