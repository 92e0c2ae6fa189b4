-- read_state: the read-only accessors. They never touch, create or extend a session:
-- no HSET of t, no PEXPIRE. ARGV[4] what: "history", "guard" (with ARGV[5] run token),
-- "buckets". An expired session reads as empty (Redis deleted its keys). The history comes
-- back as one string, records joined by RS.
local what = ARGV[4]
if what == "history" then
  return table.concat(redis.call("LRANGE", H, 0, -1), RS)
elseif what == "guard" then
  local run = ARGV[5]
  return redis.call("HMGET", S, "gw:" .. run, "gr:" .. run, "gv:" .. run)
elseif what == "buckets" then
  local keys = redis.call("ZRANGE", O, 0, -1)
  local out = {}
  for _, key in ipairs(keys) do
    out[#out + 1] = key
    out[#out + 1] = redis.call("HGET", B, key)
  end
  return out
end
return redis.error_reply("loopwatch: unknown read " .. tostring(what))
