-- loopwatch Redis store, hash scheme v1: the prelude shared by every script.
--
-- KEYS (one session, one cluster slot thanks to the {hash tag}):
--   KEYS[1] h  list   the history, oldest first, one record per element
--   KEYS[2] s  hash   session meta: n (record nonce counter), bo (bucket order counter), tn and tr (the nonce of the
--                     latest begin_call's record and the records its append trimmed,
--                     joined by \30, until another write), and per run token R the
--                     post-compaction guard: gw:R window size, ge:R enabled (1/0),
--                     gr:R remaining, gx:R window entries, gv:R last verdict, and gq:
--                     the run tokens that have a guard, oldest first, joined by \29
--                     (at most MAX_RUN_GUARDS: the oldest run's guard is dropped beyond)
--   KEYS[3] b  hash   warning buckets: key token -> last emitted bucket
--   KEYS[4] o  zset   warning key insertion order (score = bo at first insert)
-- ARGV[1] now (seconds, the LoopGuard clock; unused since idle expiry moved to Redis's own
-- clock), ARGV[2] idle TTL in seconds ("" = none), ARGV[3] idle TTL in milliseconds for
-- PEXPIRE ("" = none); the rest is per script.
--
-- Idle expiry is PEXPIRE alone, on the server's clock: every touching operation restarts
-- the TTL of all four keys, so they expire together once the session is idle that long.
-- Comparing a stored LoopGuard timestamp with the caller's clock (as MemoryStore does)
-- would compare the clocks of different workers: skewed by more than the TTL, each call
-- would wipe the session.
--
-- A record is nine fields joined by \31 (records in a reply are joined by \30): nonce,
-- run, tool, args hash, tool call id, result hash, unknown tool name, timestamp (ms), and
-- the detector profile's facts (opaque here; null when the profile records none). Every field but the nonce and the
-- timestamp is a JSON token made by Python with ensure_ascii (null or a quoted string;
-- the unknown tool name may also be = for "the tool's own name", and is otherwise a digest),
-- so fields never contain \31 and equal values have equal tokens: matching is plain
-- string comparison. Only digests are stored, never raw arguments or results.

local H, S, B, O = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local TTL_MS = ARGV[3]
local MAX_RUN_GUARDS = 256
local SEP = "\31"
local RS = "\30"
local F_NONCE, F_RUN, F_TOOL, F_ARGS, F_CALL, F_RESULT, F_UNKNOWN, F_TS, F_FACTS =
  1, 2, 3, 4, 5, 6, 7, 8, 9

local function split(text, sep)
  local fields, start = {}, 1
  while true do
    local i = string.find(text, sep, start, true)
    if not i then
      fields[#fields + 1] = string.sub(text, start)
      return fields
    end
    fields[#fields + 1] = string.sub(text, start, i - 1)
    start = i + 1
  end
end

-- The n-th field of a record without splitting all of it (run filtering is hot).
local function field(record, n)
  local start = 1
  for _ = 2, n do
    start = string.find(record, SEP, start, true) + 1
  end
  local stop = string.find(record, SEP, start, true)
  return string.sub(record, start, (stop or 0) - 1)
end

-- Called first by every operation that touches the session (expiry is Redis's: see above).
local function touch()
end

-- A run's post-compaction guard is created: remember its run token, and drop the oldest
-- run's guard beyond MAX_RUN_GUARDS (a session that lives long sees many runs; only recent
-- ones can still be compacted).
local function new_run_guard(run)
  local order = redis.call("HGET", S, "gq")
  local runs = {}
  if order and order ~= "" then
    runs = split(order, "\29")
  end
  runs[#runs + 1] = run
  while #runs > MAX_RUN_GUARDS do
    local old = table.remove(runs, 1)
    redis.call("HDEL", S, "gw:" .. old, "ge:" .. old, "gr:" .. old, "gx:" .. old, "gv:" .. old)
  end
  redis.call("HSET", S, "gq", table.concat(runs, "\29"))
end

-- A blocked call is not recorded (SPEC §5.2), yet begin_call appends its record before
-- detection decides: so begin_call keeps what its append trimmed (tn, tr), cancel_call puts
-- it back, and every other write forgets it (only a cancel right after its begin restores).
local function forget_trimmed()
  redis.call("HDEL", S, "tn", "tr")
end

-- Called last by every touching operation: the idle timer restarts on all four keys.
local function refresh()
  if TTL_MS ~= "" then
    redis.call("PEXPIRE", H, TTL_MS)
    redis.call("PEXPIRE", S, TTL_MS)
    redis.call("PEXPIRE", B, TTL_MS)
    redis.call("PEXPIRE", O, TTL_MS)
  end
end

