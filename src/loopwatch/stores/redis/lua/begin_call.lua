-- begin_call: return the run's records as they were, then append the pending record and
-- trim, in one atomic step (so every before_call sees exactly the history before it); the
-- records trimmed are kept for a cancel_call of this record (see forget_trimmed).
-- ARGV[4] run token, ARGV[5] pending record without its nonce ("" = none),
-- ARGV[6] history size.
-- Returns {nonce or "", records}: the nonce identifies the appended record for cancel_call;
-- the records are joined by RS (one bulk string parses much faster than an array of them).
touch()
local run = ARGV[4]
local scoped = {}
for _, record in ipairs(redis.call("LRANGE", H, 0, -1)) do
  if field(record, F_RUN) == run then
    scoped[#scoped + 1] = record
  end
end
local nonce = ""
if ARGV[5] ~= "" then
  nonce = tostring(redis.call("HINCRBY", S, "n", 1))
  local excess = redis.call("RPUSH", H, nonce .. SEP .. ARGV[5]) - tonumber(ARGV[6])
  if excess > 0 then
    local trimmed = redis.call("LRANGE", H, 0, excess - 1)
    redis.call("HSET", S, "tn", nonce, "tr", table.concat(trimmed, RS))
    redis.call("LTRIM", H, excess, -1)
  else
    forget_trimmed()
  end
else
  forget_trimmed()
end
refresh()
return { nonce, table.concat(scoped, RS) }
