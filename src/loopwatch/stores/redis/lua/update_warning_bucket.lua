-- update_warning_bucket: the bucket rule of SPEC §5.3 with its 256-key cap.
-- ARGV[4] warning key token, ARGV[5] bucket, ARGV[6] key cap.
-- Returns 1 when the warning is to be emitted.
touch()
forget_trimmed()
local bucket = tonumber(ARGV[5])
local emitted = 0
if bucket > tonumber(redis.call("HGET", B, ARGV[4]) or "0") then
  redis.call("HSET", B, ARGV[4], ARGV[5])
  -- A key already present keeps its insertion position (its first score).
  if not redis.call("ZSCORE", O, ARGV[4]) then
    redis.call("ZADD", O, redis.call("HINCRBY", S, "bo", 1), ARGV[4])
    if redis.call("ZCARD", O) > tonumber(ARGV[6]) then
      local oldest = redis.call("ZPOPMIN", O)
      redis.call("HDEL", B, oldest[1])
    end
  end
  emitted = 1
end
refresh()
return emitted
