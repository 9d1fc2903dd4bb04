-- reap.lua: the reaper found this slot's deadline passed; decide what it calls for, in one
-- step (reading the slot and acting on it outside a script could act on a slot that moved on).
-- ARGV[8] send_grace_s   ARGV[9] queued_check_s
-- Returns:
--   {'none'}                    deadline not due, or a stale deadline (removed)
--   {'resend', token, route}    `sending` too long: send the message again (same token)
--   {'lost', token, worker, overdue}  `running` past its lease or run deadline: requeue it
--   {'check', token, route}     `queued` for queued_check_s: check its message still exists
local send_grace_s, queued_check_s = tonumber(ARGV[8]), tonumber(ARGV[9])
local due = tonumber(redis.call('ZSCORE', KEYS[3], member) or '')
if not due or due > now then return {'none'} end
if not live(redis.call('HGET', KEYS[1], 'state')) then
  redis.call('ZREM', KEYS[3], member)
  return {'none'}
end
local st, tok = redis.call('HGET', KEYS[2], 'state'), tostring(redis.call('HGET', KEYS[2], 'token'))
local route = tostring(redis.call('HGET', KEYS[2], 'routed_to') or '')
if st == 'sending' then
  redis.call('ZADD', KEYS[3], now + send_grace_s, member)
  return {'resend', tok, route}
end
if st == 'queued' then
  redis.call('ZADD', KEYS[3], now + queued_check_s, member)
  return {'check', tok, route}
end
if st == 'running' then
  local overdue = now >= tonumber(redis.call('HGET', KEYS[2], 'run_deadline') or '0')
  return {'lost', tok, tostring(redis.call('HGET', KEYS[2], 'worker')), overdue and '1' or '0'}
end
redis.call('ZREM', KEYS[3], member)
return {'none'}
