-- probe.lua: checks that Redis can decide now, with what decisions need:
-- a script run, TIME and a write with a TTL, through commands decisions
-- use too (so the store's ACL rule covers it). A server that answers PING
-- but cannot decide (paused for writes, a read-only replica, out of
-- memory) fails it.
--
-- KEYS     one key, in the slot to check.
-- ARGV     none.
-- Reply    TIME's reply: seconds and microseconds, as strings.

local now = redis.call('TIME')
redis.call('INCRBY', KEYS[1], 1)
redis.call('PEXPIRE', KEYS[1], 60000)
return now
