package store

import (
	"strconv"

	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/fallback"
)

// The KEYS and ARGV of the store's programs, each built here by one
// function, in the order its script's header in package lua states.

// redisKey is the Redis key of key's state named by suffix. The braces are
// a hash tag: all of key's state sits in one Redis Cluster slot.
func redisKey(prefix, key, suffix string) string {
	return prefix + "{" + key + "}" + suffix
}

func limitKeys(keys []string, prefix, key string, set *spec.Set) []string {
	for i := range set.Limits {
		keys = append(keys, redisKey(prefix, key, set.Limits[i].Suffix))
	}
	return keys
}

// holdsKeys appends the holds keys of set's usage limits (see decide.lua).
func holdsKeys(keys []string, prefix, key string, set *spec.Set) []string {
	if !set.Usage {
		return keys
	}
	for i := range set.Limits {
		if c := &set.Limits[i]; c.Usage {
			keys = append(keys, redisKey(prefix, key, c.Suffix+spec.HoldsSuffix))
		}
	}
	return keys
}

// requestKeys appends the KEYS of decide.lua or peek.lua: the limits',
// their holds keys, then the ban's, if any.
func requestKeys(keys []string, prefix string, r *request) []string {
	keys = limitKeys(keys, prefix, r.key, r.set)
	keys = holdsKeys(keys, prefix, r.key, r.set)
	if r.set.Ban != nil {
		keys = append(keys, redisKey(prefix, r.key, spec.BanSuffix))
	}
	return keys
}

// endKeys appends the KEYS of end.lua: the limits', their holds keys,
// then, with any, the key's ended set.
func endKeys(keys []string, prefix string, r *request) []string {
	keys = limitKeys(keys, prefix, r.key, r.set)
	if r.set.Usage {
		keys = holdsKeys(keys, prefix, r.key, r.set)
		keys = append(keys, redisKey(prefix, r.key, spec.EndedSuffix))
	}
	return keys
}

// heldCode is the script code of c, charged from usage, held under id.
func heldCode(c *spec.Limit, id string) any {
	return c.ScriptArgs().Code.(string) + "#" + id
}

// decideArgs appends the ARGV of decide.lua (request_args, limit_args,
// ban_args), the deadline by reference, since boxing it would allocate.
// id, unless "", is the request's: a Concurrent limit's c is the id of
// the slot it takes, and limits charged from usage hold under it.
func decideArgs(args []any, r *request, deadline *int64, id string) []any {
	n := len(r.set.Limits)
	if r.set.Ban != nil {
		n = -n
	}
	args = append(args, n, r.cost, deadline)
	for i := range r.set.Limits {
		c := &r.set.Limits[i]
		l := c.ScriptArgs()
		code, last := l.Code, l.C
		switch {
		case r.ask != nil:
			code = leasedCode(c, r.ask.wants[i])
		case c.Usage && id != "":
			code = heldCode(c, id)
		}
		if i == r.set.Slot {
			last = id
		}
		args = append(args, code, l.A, l.B, last)
	}
	if b := r.set.Ban; b != nil {
		args = append(args, b.Args.After, b.Args.Within, b.Args.For, b.Args.Max)
	}
	return args
}

// peekArgs appends the ARGV of peek.lua (peek_args).
func peekArgs(args []any, r *request) []any {
	args = append(args, r.cost)
	for i := range r.set.Limits {
		l := r.set.Limits[i].ScriptArgs()
		args = append(args, l.Code, l.A, l.B, l.C)
	}
	return args
}

// endArgs appends the ARGV of end.lua (end_args). id, unless "", is the
// request's, as decideArgs took it: a Concurrent limit's c is the slot
// given back, and limits charged from usage settle its holds.
func endArgs(args []any, r *request, usage int, id string) []any {
	args = append(args, usage, r.deadline)
	for i := range r.set.Limits {
		c := &r.set.Limits[i]
		l := c.ScriptArgs()
		code, last := l.Code, l.C
		if id != "" && i == r.set.Slot {
			last = id
		}
		if id != "" && c.Usage {
			code = heldCode(c, id)
		}
		args = append(args, code, l.A, l.B, last)
	}
	return args
}

// chargeArgs returns the KEYS and ARGV of charge.lua for c (charge_args,
// charge_limit). c's identity is kept for the longest horizon of its
// limits: a resend after that finds admissions too old to count. offset
// is Redis's clock minus the Fallback's, in µs.
func chargeArgs(prefix string, c *fallback.Charge, offset int64) ([]string, []any) {
	keys := make([]string, 0, len(c.Limits)+2)
	keys = append(keys, redisKey(prefix, c.Key, spec.ChargeSuffix+c.ID))
	args := []any{max((c.Horizon()+999)/1000, 1)} // ms
	reset := false
	for _, e := range c.Limits {
		keys = append(keys, redisKey(prefix, c.Key, e.Limit.Suffix))
		resets := "0"
		if e.Reset {
			resets, reset = "1", true
		}
		l := e.Limit.ScriptArgs()
		args = append(args, l.Code, l.A, l.B, l.C, resets, len(e.Spent))
		for _, sp := range e.Spent {
			args = append(args, strconv.FormatInt(sp.At+offset, 10), sp.Cost)
		}
	}
	if reset {
		keys = append(keys, redisKey(prefix, c.Key, spec.BanSuffix))
	}
	return keys, args
}

// renewArgs returns the ARGV of renew.lua: the slots' life (µs), their ids.
func renewArgs(length int64, ids []any) []any {
	return append([]any{length}, ids...)
}
