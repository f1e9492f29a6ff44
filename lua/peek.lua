-- peek.lua: answers what decide.lua would answer now for one request,
-- without taking anything or writing anything: each limit's PEEK, or,
-- while the request's key is banned, the ban, as decide.lua answers it.
-- The store runs decide.lua, the four algorithm files, then this file.
--
-- KEYS     the request's keys, one per limit, then the holds key of each
--          limit charged from usage, then its ban key when its limits have
--          a ban; they share one {hash tag}.
-- ARGV     cost, then for each limit its algorithm code and parameters a,
--          b, c. Read only through peek_args and limit_args.
-- Reply    one line: five integers per limit (allowed 1 or 0, remaining
--          before taking cost, reset_after, retry_after, window), then, when KEYS
--          holds a ban key, banned (the time until the ban ends; 0: not
--          banned), separated by spaces. The request would pass iff every
--          allowed is 1.

-- peek_args returns the cost, the number of limits and where their
-- entries start, for limit_args.
local function peek_args()
  return tonumber(ARGV[1]), (#ARGV - 1) / 4, 2
end

local function peek()
  local cost, n, first = peek_args()
  local reply, ban = {}, #KEYS > n + holds_keys(first, n)
  if ban then
    local now = clock()
    local _, _, u = ban_state(KEYS[#KEYS])
    if now < u then
      return banned_line(n, u - now)
    end
  end
  peek_limits(reply, n, first, cost)
  if ban then
    reply[n + 1] = '0'
  end
  return table.concat(reply, ' ')
end
