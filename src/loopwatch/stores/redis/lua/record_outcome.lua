-- record_outcome: attach an outcome (SPEC §3.6) and feed the run's post-compaction guard
-- (SPEC §6), in one atomic step.
-- ARGV[4] run token, ARGV[5] tool token, ARGV[6] args hash token, ARGV[7] tool call id
-- token to match ("" = match any), ARGV[8] result hash token, ARGV[9] unknown name token,
-- ARGV[10] tool call id token as given, ARGV[11] timestamp, ARGV[12] history size,
-- ARGV[13] guard window size, ARGV[14] guard enabled (1/0): the guard's spec if it does
-- not exist yet (it is never reconfigured), ARGV[15] the profile's facts token (opaque).
-- Returns {record, abort, armed, remaining, count, window size}.
touch()
forget_trimmed()
local run, tool, args, match = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local result, unknown = ARGV[8], ARGV[9]
local history = redis.call("LRANGE", H, 0, -1)
local stored
for i = #history, 1, -1 do
  local f = split(history[i], SEP)
  if f[F_RESULT] == "null" and f[F_ARGS] == args and f[F_TOOL] == tool
      and f[F_RUN] == run and (match == "" or f[F_CALL] == match) then
    f[F_RESULT] = result
    f[F_UNKNOWN] = unknown
    f[F_FACTS] = ARGV[15]
    stored = table.concat(f, SEP)
    redis.call("LSET", H, i - 1, stored)
    break
  end
end
if not stored then
  local nonce = redis.call("HINCRBY", S, "n", 1)
  stored = table.concat(
    { nonce, run, tool, args, ARGV[10], result, unknown, ARGV[11], ARGV[15] }, SEP)
  redis.call("RPUSH", H, stored)
end
redis.call("LTRIM", H, -tonumber(ARGV[12]), -1)

-- The guard of (session, run): PostCompactionGuard.observe_quietly, field by field.
local gw, ge, gr, gx = "gw:" .. run, "ge:" .. run, "gr:" .. run, "gx:" .. run
local state = redis.call("HMGET", S, gw, ge, gr, gx)
local size, enabled, remaining, window = state[1], state[2], state[3], state[4]
if not size then
  size, enabled, remaining, window = ARGV[13], ARGV[14], "0", ""
  new_run_guard(run)
  redis.call("HSET", S, gw, size, ge, enabled, gr, remaining, gx, window)
end
size, remaining = tonumber(size), tonumber(remaining)
local abort, armed, count = 0, 0, 0
if enabled == "1" and remaining > 0 then
  remaining = remaining - 1
  local triple = tool .. "\30" .. args .. "\30" .. result
  if window == "" then
    window = triple
  else
    window = window .. "\29" .. triple
  end
  for _, entry in ipairs(split(window, "\29")) do
    if entry == triple then
      count = count + 1
    end
  end
  if remaining > 0 then
    armed = 1
  end
  if count >= size then
    abort = 1
  end
  redis.call("HSET", S, gr, remaining, gx, window)
else
  remaining = 0
end
-- The last verdict: abort,armed,remaining,count,tool token (the token may hold commas).
redis.call("HSET", S, "gv:" .. run,
  abort .. "," .. armed .. "," .. remaining .. "," .. count .. "," .. tool)
refresh()
return { stored, abort, armed, remaining, count, size }
