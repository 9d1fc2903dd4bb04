-- synth_requeue.lua: a synthesis attempt ended without a witness for a reason that another
-- attempt may not share (its worker died: the reaper; an unexpected error: the task). The
-- slot goes back to `synth_sending` with a new synth token, or the job fails when the
-- attempts are spent. The caller sends the message.
-- ARGV[8] expected synth token   ARGV[9] require_expired (1: only if the lease deadline passed)
-- ARGV[10] event name   ARGV[11] reason   ARGV[12] max_attempts   ARGV[13] send_grace_s
-- Returns {'send', new synth token}, {'failed'}, {'stale'}, {'skip', why} or {'job_over'}.
local token, require_expired, ev, reason, max_attempts, send_grace_s =
  ARGV[8], ARGV[9], ARGV[10], ARGV[11], tonumber(ARGV[12]), tonumber(ARGV[13])
local smember = job_id .. sep .. 's' .. slot
if not live(redis.call('HGET', KEYS[1], 'state')) then
  redis.call('ZREM', KEYS[3], smember)
  return {'job_over'}
end
if redis.call('HGET', KEYS[2], 'synth_token') ~= token then return {'stale'} end
local st = tostring(redis.call('HGET', KEYS[2], 'state'))
if st ~= 'synthesizing' then return {'skip', st} end
if require_expired == '1' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[3], smember) or '0')
  if dl > now then return {'skip', 'lease alive'} end
end
local attempts = tonumber(redis.call('HGET', KEYS[2], 'synth_attempts') or '0')
event({event = ev, attempt = attempts, worker = tostring(redis.call('HGET', KEYS[2], 'synth_worker')),
       reason = reason})
if attempts >= max_attempts then
  redis.call('ZREM', KEYS[3], smember)
  fail_job(label(slot) .. ': synthesis of ' .. tostring(redis.call('HGET', KEYS[2], 'input_name')) ..
           ' gave up after ' .. attempts .. ' attempts; last: ' .. reason, slot)
  return {'failed'}
end
local newtok = redis.call('HINCRBY', KEYS[2], 'synth_token', 1)
redis.call('HSET', KEYS[2], 'state', 'synth_sending', 'enqueued_at', now_s)
redis.call('ZADD', KEYS[3], now + send_grace_s, smember)
redis.call('PUBLISH', channel, 'requeued')
return {'send', tostring(newtok)}
