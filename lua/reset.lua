-- reset.lua: forgets a client key's state under some limits.
--
-- KEYS     the keys of the state to forget; they share one {hash tag}.
-- ARGV     none.
-- Reply    the number of keys that existed.

return redis.call('DEL', unpack(KEYS))
