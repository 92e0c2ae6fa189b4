-- cancel_call: remove the pending record a blocked before_call appended and, when nothing
-- was written to the session since, put back the records its append trimmed (SPEC §5.2:
-- the history is as if the blocked call had never been seen).
-- ARGV[4] its nonce ("" when unknown), ARGV[5] its fields after the nonce (the fallback
-- match, newest first, pending records only).
touch()
local kept = redis.call("HMGET", S, "tn", "tr")
forget_trimmed()
local history = redis.call("LRANGE", H, 0, -1)
for i = #history, 1, -1 do
  local record = history[i]
  local cut = string.find(record, SEP, 1, true)
  local hit
  if ARGV[4] ~= "" then
    hit = string.sub(record, 1, cut - 1) == ARGV[4]
  else
    hit = string.sub(record, cut + 1) == ARGV[5]
  end
  if hit then
    -- Records start with a digit, so this tombstone matches nothing else.
    redis.call("LSET", H, i - 1, "x")
    redis.call("LREM", H, 1, "x")
    if ARGV[4] ~= "" and kept[1] == ARGV[4] then
      local trimmed = split(kept[2], RS)
      for j = #trimmed, 1, -1 do
        redis.call("LPUSH", H, trimmed[j])
      end
    end
    break
  end
end
refresh()
return 1
