package store

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/store/internal/fallback"
)

// ErrMisconfigured reports that Redis will not decide until its setup or
// the client's changes. Such an error wraps it and what Redis or the
// client said, and says what to change, naming neither a password nor a
// key. A [Fallback] decides in process meanwhile; see docs/managed-redis.md.
var ErrMisconfigured = errors.New("store: Redis is misconfigured")

// misconfiguration is an error of ErrMisconfigured: what is wrong, what
// to change (neither holds a password or a key), and what Redis said.
type misconfiguration struct {
	problem, fix string
	err          error
}

func (e *misconfiguration) Error() string {
	return ErrMisconfigured.Error() + ": " + e.problem + "; " + e.fix + " (" + e.err.Error() + ")"
}

func (e *misconfiguration) Unwrap() []error { return []error{ErrMisconfigured, e.err} }

// storeCommands are the commands the library's scripts call, in lower
// case, the package admin's (hexists, hget, hlen) included, so that one
// rule serves both.
var storeCommands = []string{
	"ping", "time", "del", "get", "set", "pttl", "pexpire", "incrby", "decrby",
	"zadd", "zcard", "zcount", "zrange", "zrangebyscore", "zrem", "zremrangebyrank", "zremrangebyscore", "zscore",
	"hdel", "hexists", "hget", "hgetall", "hincrby", "hlen", "hmget", "hset",
}

// ACLRule returns the Redis ACL rule that allows an ACL user what a store
// with the given key prefix, and the package admin under it, need, and
// nothing else (see docs/managed-redis.md). A Redis Cluster client also
// needs +cluster|slots.
func ACLRule(prefix string) string {
	return "~" + prefix + "* resetchannels -@all +eval +evalsha +" + strings.Join(storeCommands, " +")
}

// faultOf classifies err, returned for a request whose context is ctx:
// the one list of what the Fallback takes for Redis failing
// (docs/production.md repeats it). Not an error once ctx has ended, nor a
// reply of Redis's but outageReplies (WRONGTYPE, a script's own error),
// which is the request's.
func faultOf(ctx context.Context, err error) fallback.Fault {
	switch {
	case err == nil:
		return fallback.None
	case errors.Is(err, ErrMisconfigured):
		return fallback.Misconfigured
	case ctx.Err() != nil:
		return fallback.None // the caller gave up; Redis may be fine
	case errors.Is(err, errSliceWait):
		return fallback.Waited // waiting on another request is no fault of Redis's
	}
	msg, ok := replyText(err)
	if !ok || slices.ContainsFunc(outageReplies, func(p string) bool { return strings.HasPrefix(msg, p) }) {
		return fallback.Outage // the network, a timeout, a closed client, or an outage reply
	}
	return fallback.None
}

// outageReplies start the replies of a Redis that cannot decide now but
// will without a change of setup (MISCONF: a failing disk; BUSY: a busy
// script). MOVED and ASK reach here only through a cluster client, which
// follows them: one that still gets them is mid-resharding.
var outageReplies = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "OOM", "MISCONF", "NOREPLICAS", "ERR max number of clients", "MOVED", "ASK"}

// misconfigured returns err as a misconfiguration if it says Redis refuses
// the store's setup; prefix is the store's key prefix.
func misconfigured(err error, prefix string, cluster bool) error {
	msg, ok := replyText(err)
	if !ok {
		if ce := tlsProblem(err); ce != nil {
			return ce
		}
		return err
	}
	rule := func() string { return "the store needs the ACL rule " + ACLRule(prefix) }
	ce := &misconfiguration{err: err}
	switch {
	case strings.HasPrefix(msg, "NOAUTH"), strings.Contains(msg, "Protocol error: unauthenticated"):
		// Before AUTH, Redis refuses a command of many arguments (the
		// check's) with a protocol error, not NOAUTH.
		ce.problem = "Redis requires a password and the client gave none"
		ce.fix = "give the client's Password (and Username for an ACL user)"
	case strings.HasPrefix(msg, "WRONGPASS"):
		ce.problem = "Redis rejected the client's username or password"
		ce.fix = "check the client's Username and Password: was the password rotated?"
	case strings.HasPrefix(msg, "NOPERM") && strings.Contains(msg, "key"):
		ce.problem = "the ACL user may not use the store's keys"
		ce.fix = "give it ~" + prefix + "*"
	case strings.HasPrefix(msg, "NOPERM"):
		ce.problem = "the ACL user may not run a command the store needs"
		if name, ok := quoted(msg); ok {
			ce.problem = "the ACL user may not run " + strings.ToLower(name)
			ce.fix = "add +" + strings.ToLower(name) + " to its rule; " + rule()
		} else {
			ce.fix = rule()
		}
	case strings.Contains(msg, "can't run this command"), strings.Contains(msg, "has no permissions"):
		// Redis: "... can't run this command or subcommand"; Valkey:
		// "User x has no permissions to run the 'hget' command".
		ce.problem = "the ACL user may not run a command the store's scripts call"
		ce.fix = rule() + " (Redis.Check names the command)"
		if name, ok := quoted(msg[strings.Index(msg, "run"):]); ok {
			ce.problem = "the ACL user may not run " + strings.ToLower(name)
			ce.fix = "add +" + strings.ToLower(name) + " to its rule; " + rule()
		}
	case strings.Contains(msg, "can't access") && strings.Contains(msg, "key"):
		ce.problem = "the ACL user may not use the store's keys"
		ce.fix = "give it ~" + prefix + "*"
	case strings.HasPrefix(msg, "ERR unknown command"):
		name, _ := quoted(msg)
		ce.problem = "Redis has renamed or disabled " + strings.ToLower(name)
		ce.fix = "the store needs EVAL, EVALSHA and " + strings.Join(storeCommands, ", ")
	case strings.Contains(msg, "Unknown Redis command called from script"):
		ce.problem = "Redis has renamed or disabled a command the store's scripts call"
		ce.fix = "the store needs EVAL, EVALSHA and " + strings.Join(storeCommands, ", ") + " (Redis.Check names the command)"
	case !cluster && (strings.HasPrefix(msg, "MOVED") || strings.HasPrefix(msg, "ASK") || strings.HasPrefix(msg, "CROSSSLOT")):
		ce.problem = "this server is a Redis Cluster node, reached by a single server's client"
		ce.fix = "use a cluster client (redis.NewClusterClient)"
	default:
		return err
	}
	return ce
}

// quoted returns the first text between single quotes in msg.
func quoted(msg string) (string, bool) {
	_, rest, ok := strings.Cut(msg, "'")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "'")
	return name, ok && name != ""
}

// causeOf names in a few words why a call to Redis failed with err: what
// the network said, "timeout", the first word of Redis's answer, or the
// problem of a misconfiguration. It holds no address, key or password.
func causeOf(err error) string {
	var (
		m     *misconfiguration
		reply redis.Error
		errno syscall.Errno
		dns   *net.DNSError
		ne    net.Error
	)
	switch {
	case errors.As(err, &m):
		return m.problem
	case errors.As(err, &reply):
		word, _, _ := strings.Cut(reply.Error(), " ")
		return "Redis answered " + word
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "no such host"
		}
		return "DNS failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, redis.ErrClosed):
		return "connection closed"
	}
	return "unavailable"
}

func misconfigurations(err error) []*misconfiguration {
	switch e := err.(type) {
	case *misconfiguration:
		return []*misconfiguration{e}
	case interface{ Unwrap() error }:
		return misconfigurations(e.Unwrap())
	case interface{ Unwrap() []error }:
		var all []*misconfiguration
		for _, err := range e.Unwrap() {
			all = append(all, misconfigurations(err)...)
		}
		return all
	}
	return nil
}
