-- reset.lua: forgets a client key's state under some limits, and its ban.
--
-- KEYS     the keys of the state to forget, the key's ban key among them;
--          they share one {hash tag}.
-- ARGV     none.
-- Reply    the number of keys that existed.

return redis.call('DEL', unpack(KEYS))
