-- prelude.lua: put in front of every script by barrier.py (so line numbers in Redis's error
-- messages are offset by this file's length).
--
-- Every script is called the same way:
--   KEYS[1] zkq:job:{job}   KEYS[2] zkq:job:{job}:slot:{slot}   KEYS[3] zkq:deadlines
--   KEYS[4] zkq:job:{job}:events   KEYS[5] zkq:routed
--   KEYS[6..] the shared keys its header names on its "keys:" line, in that order: K.<name>
--   ARGV[1] JSON context: job, slot, prefix, sep, keys (those names) and settings: the fleet
--           settings its "settings:" line names, and result_ttl_s (S.<name>)
--   ARGV[2] JSON object of its own arguments: exactly the names on its "args:" line (A.<name>)
-- tests/test_lua_scripts.py checks each header against its script's body and its callers.
--
-- A job's slots, all with the same fields and the same states:
--   "0".."n-1"      prove partition i
--   "s0".."s{n-1}"  compute partition i's witness (jobs submitted as circuit inputs)
--   "finalize"      verify every proof, then release the result
--   idle -> sending -> queued -> running -> proved (a partition) | done (a witness) |
--   verified (finalize, and every partition of a done job) | failed
-- A partition of an inputs job is idle until its witness exists (witness_ready.lua).
--
-- Time is Redis's (TIME), never a caller's: workers' clocks may disagree.
local C = cjson.decode(ARGV[1])
local A = cjson.decode(ARGV[2])
local S = C.settings
local K = {job = KEYS[1], slot = KEYS[2], deadlines = KEYS[3], events = KEYS[4], routed = KEYS[5]}
for i, name in ipairs(C.keys) do K[name] = KEYS[5 + i] end
local job_id, slot, sep = C.job, C.slot, C.sep
local job_prefix = C.prefix .. ':job:' .. job_id
local channel = job_prefix .. ':notify'
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local now_s = string.format('%.6f', now)

local function hget(key, field) return redis.call('HGET', key, field) end
local function slot_key(s) return job_prefix .. ':slot:' .. s end
local function member_of(s) return job_id .. sep .. s end
local member = member_of(slot)

-- 'prove' ("3"), 'synth' ("s3": partition 3's witness) or 'finalize'.
local function kind_of(s)
  if s == 'finalize' then return 'finalize' end
  if string.sub(s, 1, 1) == 's' then return 'synth' end
  return 'prove'
end
local kind = kind_of(slot)
-- The partition a slot serves ("s3" -> "3"), or 'finalize'.
local function index_of(s)
  if kind_of(s) == 'synth' then return string.sub(s, 2) end
  return s
end
local function label(s)
  s = s or slot
  if s == 'finalize' then return 'finalize' end
  return 'partition ' .. index_of(s)
end
-- How a message about a slot begins: "partition 3:", "partition 3: synthesis of in3.json", "finalize:".
local function subject(s)
  s = s or slot
  if kind_of(s) == 'synth' then
    return label(s) .. ': synthesis of ' .. tostring(hget(slot_key(s), 'input_name'))
  end
  return label(s) .. ':'
end

local function live(js) return js == 'queued' or js == 'running' end
local function contains(list, item)
  return string.find(' ' .. (list or '') .. ' ', ' ' .. item .. ' ', 1, true) ~= nil
end
-- Fencing: true when the slot is under `token`, in one of `states` (space separated) and, when
-- `worker` is given, held by it. Every transition of an attempt checks this first.
local function current(token, states, worker)
  if tostring(hget(K.slot, 'token')) ~= tostring(token) then return false end
  if not contains(states, tostring(hget(K.slot, 'state'))) then return false end
  return worker == nil or hget(K.slot, 'worker') == worker
end
-- Adds `item` to the space-separated list in hash field `field` of `key` (once).
local function add_word(key, field, item)
  local list = hget(key, field)
  if not contains(list, item) then
    redis.call('HSET', key, field, (((list or '') .. ' ' .. item):gsub('^ ', '')))
  end
end
local function words(list)
  local out = {}
  for w in string.gmatch(list or '', '%S+') do table.insert(out, w) end
  return out
end
local function event(fields)
  if fields.slot == nil then fields.slot = index_of(slot) end
  fields.at = now
  redis.call('RPUSH', K.events, cjson.encode(fields))
end
-- Calls fn(slot) for every slot of the job: each partition, each witness, finalize.
local function each_slot(fn)
  for i = 0, tonumber(hget(K.job, 'n') or '0') - 1 do
    fn(tostring(i))
    fn('s' .. i)
  end
  fn('finalize')
end
local function drop_members()
  each_slot(function(s)
    redis.call('ZREM', K.deadlines, member_of(s))
    redis.call('ZREM', K.routed, member_of(s))
  end)
end
-- An ended job's keys live on for result_ttl_s.
local function expire_job()
  local ttl = math.max(1, math.floor(S.result_ttl_s))
  for _, suffix in ipairs({'', ':results', ':events', ':bad'}) do
    redis.call('EXPIRE', job_prefix .. suffix, ttl)
  end
  each_slot(function(s) redis.call('EXPIRE', slot_key(s), ttl) end)
  local req = hget(K.job, 'request_id')
  if req and req ~= '' then redis.call('EXPIRE', C.prefix .. ':request:' .. req, ttl) end
end
local function end_job(state)
  redis.call('HSET', K.job, 'state', state, 'finished_at', now_s)
  drop_members()
  expire_job()
  redis.call('PUBLISH', channel, state)
end
-- Fails the job with `reason`, blaming the partition slot `s` serves (default: this one).
local function fail_job(reason, s)
  redis.call('HSET', K.job, 'error', reason, 'error_slot', index_of(s or slot))
  end_job('failed')
end
-- Puts slot `s` back in `sending` with a new token; the caller sends the message (to the
-- worker `route`'s own queue, or the shared queue when '').
local function resend_slot(s, route)
  local key, m = slot_key(s), member_of(s)
  local newtok = redis.call('HINCRBY', key, 'token', 1)
  redis.call('HSET', key, 'state', 'sending', 'routed_to', route, 'enqueued_at', now_s)
  redis.call('ZADD', K.deadlines, now + S.send_grace_s, m)
  if route ~= '' then redis.call('ZADD', K.routed, now, m) else redis.call('ZREM', K.routed, m) end
  return newtok
end
