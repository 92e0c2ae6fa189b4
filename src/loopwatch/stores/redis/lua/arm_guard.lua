-- arm_guard: arm the run's post-compaction guard, creating it from the given spec when
-- it does not exist yet. ARGV[4] run token, ARGV[5] window size, ARGV[6] enabled (1/0).
-- Returns {window size, enabled}: the guard's real spec.
touch()
forget_trimmed()
local gw, ge = "gw:" .. ARGV[4], "ge:" .. ARGV[4]
local state = redis.call("HMGET", S, gw, ge)
local size, enabled = state[1], state[2]
if not size then
  size, enabled = ARGV[5], ARGV[6]
  new_run_guard(ARGV[4])
end
-- Arming opens a fresh window; the last verdict is left as it is.
redis.call("HSET", S, gw, size, ge, enabled, "gr:" .. ARGV[4], size, "gx:" .. ARGV[4], "")
refresh()
return { tonumber(size), tonumber(enabled) }
