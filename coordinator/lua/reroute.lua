-- reroute.lua: a slot goes to another worker without an attempt spent: the worker that took
-- it is excluded from it or quarantined, or the worker it was routed to is gone. It counts a
-- bounce instead; and when no eligible worker is alive (`orphaned`) a clock starts, after
-- orphan_timeout_s of which the job fails with the reason. The caller sends the message.
-- args: token states event reason route orphaned
-- settings: max_bounces orphan_timeout_s
-- states: those the slot may be in (space separated); route: a worker's own queue ('' =
-- the shared one).
-- Returns {'send', new token}, {'failed'}, {'stale'}, {'skip', why} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if tostring(hget(K.slot, 'token')) ~= tostring(A.token) then return {'stale'} end
if not current(A.token, A.states) then return {'skip', tostring(hget(K.slot, 'state'))} end
event({event = A.event, attempt = tonumber(hget(K.slot, 'attempts') or '0'),
       worker = tostring(hget(K.slot, 'worker')), reason = A.reason})
if A.orphaned then
  local since = tonumber(hget(K.slot, 'orphaned_since') or '')
  if not since then
    redis.call('HSET', K.slot, 'orphaned_since', now_s)
  elseif now - since >= S.orphan_timeout_s then
    fail_job(subject() .. ' ' .. A.reason)
    return {'failed'}
  end
else
  redis.call('HDEL', K.slot, 'orphaned_since')
end
if redis.call('HINCRBY', K.slot, 'bounces', 1) > S.max_bounces then
  fail_job(subject() .. ' ' .. A.reason)
  return {'failed'}
end
local newtok = resend_slot(slot, A.route)
redis.call('PUBLISH', channel, 'requeued')
return {'send', tostring(newtok)}
