// Package store implements [ratelimit.Store] three ways.
//
// Its words, each with one meaning:
//
//   - key: whom a request is counted against, as the Limiter gives it;
//     on Redis, all of a key's state sits under one hash tag, {key}.
//   - set: the limits one request is decided against, all or nothing (a
//     [ratelimit.Limits], compiled once).
//   - program: the Lua script, or the function of the library loaded in
//     Redis, that makes one decision in one atomic run.
//   - batch: decisions sent together, in one round trip per master.
//   - deny cache: denials this instance remembers until they end, to
//     answer a repeat without asking Redis.
//   - slice: units of a leased limit ([ratelimit.Limit] Leased) that this
//     instance took ahead and spends in process; it ends before the
//     window that counted them.
//   - slot: a request's place under a Concurrent limit, held until End,
//     renewed meanwhile.
//   - ban: a key denied outright for a time that grows with its strikes
//     (see [ratelimit.Ban]).
//   - fault: what makes a Fallback decide in process: an outage, which
//     passes, or a misconfiguration ([ErrMisconfigured]), which needs a
//     fix.
//   - backlog: what a Fallback decided in process, per key, on its way to
//     Redis once Redis answers again.
//
// [Redis] keeps the counters in Redis, shared by every instance of a
// service. Each decision is one atomic run of the Lua scripts of the
// package lua, which read the time from Redis; every key it writes has a
// TTL. It works with a single server, Sentinel (go-redis's failover
// client), Redis Cluster and Ring. [Redis.Check] tells a misconfigured
// Redis from a working one, with an error saying what to fix that wraps
// [ErrMisconfigured] (see docs/managed-redis.md).
//
// [NewMemory]'s store keeps the counters in this process, with the same
// semantics as the Redis scripts, in bounded memory: for a service with
// one instance, for tests, and as the Fallback's local store.
//
// [Fallback] decides with Redis and, when Redis is down, slow,
// misconfigured or failing over, in process, dividing each limit among
// the service's instances; when Redis answers again it brings what was
// decided meanwhile to Redis, then sends decisions back to it: the
// configuration to run in production. [Fallback.Health] says where its
// decisions are made and what it has counted; its [FallbackHealth]
// marshals to JSON for a health handler.
//
// Each applies the ban a set of limits may carry (see [ratelimit.Ban]) in
// the same atomic step as the limits, kept beside the key's counters; a
// Fallback's bans follow where it decides (see [Fallback]).
//
// All three are safe for concurrent use, and take their options as a
// struct whose zero value means every default.
package store
