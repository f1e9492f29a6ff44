-- probe.lua: checks that Redis can decide now, with what decisions need:
-- a script run, TIME and a write with a TTL. A server that answers PING
-- but cannot decide (paused for writes, a read-only replica, out of
-- memory) fails it.
--
-- KEYS     one key, in the slot to check.
-- ARGV     none.
-- Reply    TIME's reply: seconds and microseconds, as strings.

local now = redis.call('TIME')
redis.call('SET', KEYS[1], '1', 'PX', 60000)
return now
