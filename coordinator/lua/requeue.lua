-- requeue.lua: moves a slot back to `sending` with a new token (the caller sends the message).
-- ARGV[8] expected token ('' = any)   ARGV[9] allowed states (space separated)
-- ARGV[10] require_expired (1: only if the slot's deadline passed)   ARGV[11] event name
-- ARGV[12] reason   ARGV[13] worker to exclude from this slot ('' = none)
-- ARGV[14] route: a worker's own queue ('' = the shared queue)   ARGV[15] max_attempts
-- ARGV[16] send_grace_s   ARGV[17] counts_as_attempt (1/0; 0 counts a bounce instead)
-- ARGV[18] max_bounces   ARGV[19] orphaned (1: no eligible worker is alive for this slot)
-- ARGV[20] orphan_timeout_s: an orphaned slot fails the job with the reason after this long
-- Returns {'send', new token}, {'failed'} (the job failed with the reason), {'stale'},
-- {'skip', why} or {'job_over'}.
local token, states, require_expired, ev, reason, exclude, route, max_attempts, send_grace_s,
      counts_as_attempt, max_bounces, orphaned, orphan_timeout_s =
  ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], tonumber(ARGV[15]),
  tonumber(ARGV[16]), ARGV[17], tonumber(ARGV[18]), ARGV[19], tonumber(ARGV[20])
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
local tok = redis.call('HGET', KEYS[2], 'token')
if token ~= '' and tok ~= token then return {'stale'} end
local st = redis.call('HGET', KEYS[2], 'state')
if not contains(states, tostring(st)) then return {'skip', tostring(st)} end
if require_expired == '1' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[3], member) or '0')
  if dl > now then return {'skip', 'lease alive'} end
end
local attempts = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0')
event({event = ev, attempt = attempts, worker = tostring(redis.call('HGET', KEYS[2], 'worker')), reason = reason})
if orphaned == '1' then
  local since = tonumber(redis.call('HGET', KEYS[2], 'orphaned_since') or '')
  if not since then
    redis.call('HSET', KEYS[2], 'orphaned_since', now_s)
  elseif now - since >= orphan_timeout_s then
    fail_job(label(slot) .. ': ' .. reason, slot)
    return {'failed'}
  end
else
  redis.call('HDEL', KEYS[2], 'orphaned_since')
end
if counts_as_attempt == '1' then
  if attempts >= max_attempts then
    fail_job(label(slot) .. ': gave up after ' .. attempts .. ' attempts; last: ' .. reason, slot)
    return {'failed'}
  end
elseif redis.call('HINCRBY', KEYS[2], 'bounces', 1) > max_bounces then
  fail_job(label(slot) .. ': ' .. reason, slot)
  return {'failed'}
end
if exclude ~= '' then add_word(KEYS[2], 'excluded', exclude) end
local newtok = resend_slot(KEYS[2], member, route, send_grace_s)
redis.call('PUBLISH', channel, 'requeued')
return {'send', tostring(newtok)}
