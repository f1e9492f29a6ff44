// Package store implements [ratelimit.Store].
//
// [Redis] keeps the counters in Redis, decided by the Lua scripts of the
// package lua, so that every instance of a service shares one limit.
package store
