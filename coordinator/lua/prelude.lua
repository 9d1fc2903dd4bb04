-- prelude.lua: put in front of every script by barrier.py (so line numbers in errors are
-- offset by this file's length).
--
-- KEYS[1] zkq:job:{job}            the job hash
-- KEYS[2] zkq:job:{job}:slot:{s}   the slot hash the script acts on
-- KEYS[3] zkq:deadlines            zset "{job}|{slot}" -> when the reaper acts
-- KEYS[4] zkq:job:{job}:events     list of JSON events
-- KEYS[5] zkq:routed               zset of slots routed to one worker's own queue
-- ARGV[1] job id   ARGV[2] slot ("0".."n-1" or "finalize")   ARGV[3] result_ttl_s
-- ARGV[4] the job's notify channel   ARGV[5] member separator ("|")
-- ARGV[6] job key prefix (zkq:job:{job})   ARGV[7] request key prefix (zkq:request:)
-- Each script's own arguments start at ARGV[8] and its own keys at KEYS[6].
--
-- Time is Redis's (TIME), never a caller's: workers' clocks may disagree.
local job_id, slot, result_ttl, channel, sep, job_prefix, request_prefix =
  ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local now_s = string.format('%.6f', now)
local member = job_id .. sep .. slot

local function label(s) if s == 'finalize' then return 'finalize' end return 'partition ' .. s end
local function live(js) return js == 'queued' or js == 'running' end
local function contains(list, item)
  return string.find(' ' .. (list or '') .. ' ', ' ' .. item .. ' ', 1, true) ~= nil
end
-- Adds `item` to the space-separated list in hash field `field` of `key` (once).
local function add_word(key, field, item)
  local list = redis.call('HGET', key, field)
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
  if fields.slot == nil then fields.slot = slot end
  fields.at = now
  redis.call('RPUSH', KEYS[4], cjson.encode(fields))
end
local function drop_members()
  local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
  for i = 0, n - 1 do
    redis.call('ZREM', KEYS[3], job_id .. sep .. i)
    redis.call('ZREM', KEYS[5], job_id .. sep .. i)
  end
  redis.call('ZREM', KEYS[3], job_id .. sep .. 'finalize')
  redis.call('ZREM', KEYS[5], job_id .. sep .. 'finalize')
end
-- An ended job's keys live on for result_ttl_s (the same names keys.all_job_keys builds).
local function expire_job()
  local ttl = math.max(1, math.floor(result_ttl))
  local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
  for _, suffix in ipairs({'', ':results', ':events', ':bad', ':slot:finalize'}) do
    redis.call('EXPIRE', job_prefix .. suffix, ttl)
  end
  for i = 0, n - 1 do redis.call('EXPIRE', job_prefix .. ':slot:' .. i, ttl) end
  local req = redis.call('HGET', KEYS[1], 'request_id')
  if req and req ~= '' then redis.call('EXPIRE', request_prefix .. req, ttl) end
end
local function end_job(state)
  redis.call('HSET', KEYS[1], 'state', state, 'finished_at', now_s)
  drop_members()
  expire_job()
  redis.call('PUBLISH', channel, state)
end
local function fail_job(reason, where)
  redis.call('HSET', KEYS[1], 'error', reason, 'error_slot', where)
  end_job('failed')
end
-- Puts a slot back in `sending` with a new token (the caller sends the message).
local function resend_slot(key, m, route, send_grace_s)
  local newtok = redis.call('HINCRBY', key, 'token', 1)
  redis.call('HSET', key, 'state', 'sending', 'routed_to', route, 'enqueued_at', now_s)
  redis.call('ZADD', KEYS[3], now + send_grace_s, m)
  if route ~= '' then redis.call('ZADD', KEYS[5], now, m) else redis.call('ZREM', KEYS[5], m) end
  return newtok
end
