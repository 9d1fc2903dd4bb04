-- synth_reap.lua: the reaper found a synthesis deadline ("{job}|s{index}") passed; decide
-- what it calls for in one step, as reap.lua does for partitions.
-- ARGV[8] send_grace_s   ARGV[9] queued_check_s
-- Returns:
--   {'none'}                      not due, or a stale deadline (removed)
--   {'resend', synth token}       `synth_sending` too long: send the message again
--   {'check', synth token}        `synth_queued` for queued_check_s: check its message exists
--   {'lost', synth token, worker, overdue}  `synthesizing` past its lease or run deadline
local send_grace_s, queued_check_s = tonumber(ARGV[8]), tonumber(ARGV[9])
local smember = job_id .. sep .. 's' .. slot
local due = tonumber(redis.call('ZSCORE', KEYS[3], smember) or '')
if not due or due > now then return {'none'} end
if not live(redis.call('HGET', KEYS[1], 'state')) then
  redis.call('ZREM', KEYS[3], smember)
  return {'none'}
end
local st, tok = redis.call('HGET', KEYS[2], 'state'), tostring(redis.call('HGET', KEYS[2], 'synth_token'))
if st == 'synth_sending' then
  redis.call('ZADD', KEYS[3], now + send_grace_s, smember)
  return {'resend', tok}
end
if st == 'synth_queued' then
  redis.call('ZADD', KEYS[3], now + queued_check_s, smember)
  return {'check', tok}
end
if st == 'synthesizing' then
  local overdue = now >= tonumber(redis.call('HGET', KEYS[2], 'synth_run_deadline') or '0')
  return {'lost', tok, tostring(redis.call('HGET', KEYS[2], 'synth_worker')), overdue and '1' or '0'}
end
redis.call('ZREM', KEYS[3], smember)
return {'none'}
