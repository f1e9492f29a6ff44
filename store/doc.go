// Package store implements [ratelimit.Store] three ways: [Redis] keeps the
// counters in Redis, shared by every instance of a service; [NewMemory]'s
// store keeps them in this process, deciding as the Redis scripts do; and
// [Fallback], the configuration to run in production, decides with Redis
// and, while Redis fails, in process. Each applies a set's ban (see
// [ratelimit.Ban]) in the same atomic step as its limits. All three are
// safe for concurrent use, and take options whose zero value means every
// default. See docs/production.md and docs/managed-redis.md.
//
// Its words, each with one meaning:
//
//   - key: whom a request is counted against, as the Limiter gives it;
//     on Redis, all of a key's state sits under one hash tag, {key}.
//   - set: the limits one request is decided against, all or nothing (a
//     [ratelimit.Limits], compiled once).
//   - program: the Lua script, or Redis Function, that makes one decision.
//   - batch: decisions sent together, in one round trip per master.
//   - deny cache: denials this instance remembers, to answer a repeat.
//   - slice: units of a leased limit ([ratelimit.Limit] Leased) that this
//     instance took ahead, to spend in process before their window ends.
//   - slot: a request's place under a Concurrent limit, held until End.
//   - ban: a key denied outright for a time that grows with its strikes.
//   - fault: what makes a Fallback decide in process: an outage, which
//     passes, or a misconfiguration ([ErrMisconfigured]), which needs a fix.
//   - backlog: what a Fallback decided in process, on its way to Redis.
package store
