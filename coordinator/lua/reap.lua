-- reap.lua: the reaper found this slot's deadline passed; decide what it calls for, in one
-- step (reading the slot and acting on it outside a script could act on a slot that moved on).
-- args:
-- settings: queued_check_s reaper_interval_s orphan_timeout_s
-- Returns:
--   {'none'}                          deadline not due, or a stale deadline (removed)
--   {'resend', token, route}          `sending` too long: send the message again (same token)
--   {'lost', token, worker, overdue}  `running` past its lease or run deadline: requeue it
--   {'check', token, route}           `queued` for queued_check_s: check its message still exists
--   {'parked', token}                 `parked`: look for an eligible worker (reroute.lua)
--   {'gave_up'}                       parked for orphan_timeout_s: given up with its reason
local due = tonumber(redis.call('ZSCORE', K.deadlines, member) or redis.call('ZSCORE', K.checks, member) or '')
if not due or due > now then return {'none'} end
if not live(hget(K.job, 'state')) then
  no_deadline(member)
  return {'none'}
end
-- The slot's fields in one read.
local f = redis.call('HMGET', K.slot, 'state', 'token', 'routed_to', 'run_deadline', 'worker')
local st, tok = f[1], tostring(f[2])
local route = tostring(f[3] or '')
if st == 'sending' then
  deadline_at(member, now + S.send_grace_s)
  return {'resend', tok, route}
end
if st == 'queued' then
  check_at(member, now + S.queued_check_s)
  return {'check', tok, route}
end
if st == 'running' then
  local overdue = now >= tonumber(f[4] or '0')
  return {'lost', tok, tostring(f[5]), overdue and '1' or '0'}
end
if st == 'parked' then
  if now - tonumber(hget(K.slot, 'parked_since') or now) >= S.orphan_timeout_s then
    event({event = 'gave_up', reason = hget(K.slot, 'parked_reason')})
    give_up(subject() .. ' ' .. tostring(hget(K.slot, 'parked_reason')))
    return done({'gave_up'})
  end
  deadline_at(member, now + S.reaper_interval_s)
  return {'parked', tok}
end
no_deadline(member)
return {'none'}
