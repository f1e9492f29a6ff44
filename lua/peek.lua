-- peek.lua: answers what decide.lua would answer now for one request,
-- without taking anything or writing anything: each limit's PEEK. The
-- store runs decide.lua, the four algorithm files, then this file.
--
-- KEYS     the request's keys, one per limit; they share one {hash tag}.
-- ARGV     cost, then for each limit its algorithm code and parameters a,
--          b, c.
-- Reply    one line: four integers per limit (allowed 1 or 0, remaining
--          before taking cost, reset_after, retry_after), separated by
--          spaces. The request would pass iff every allowed is 1.

local function peek()
  local cost, reply = tonumber(ARGV[1]), {}
  for i = 1, #KEYS do
    local j = 4 * i - 2
    local code, now = ARGV[j], 0
    if not clockless[code] then
      now = clock()
    end
    local ok, remaining, reset, retry = algorithms[code](PEEK, KEYS[i], cost,
      tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), now)
    reply[i] = string.format('%d %d %d %d', ok, remaining, reset, retry)
  end
  return table.concat(reply, ' ')
end
