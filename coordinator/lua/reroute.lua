-- reroute.lua: a slot goes to another worker without an attempt spent: the worker that took
-- it is excluded from it or quarantined, the worker it was routed to is gone, or a parked
-- slot has an eligible worker again, or a worker that holds its key loaded is free soon
-- (affinity = true: marked so, the reaper sends it back to the shared queue if that worker
-- does not take it within affinity_wait_s). It counts a bounce (a guard against a slot circling
-- for ever); past max_bounces it is given up. The caller sends the message.
-- args: token states event reason route affinity
-- settings: max_bounces
-- states: those the slot may be in (space separated); route: a worker's own queue ('' =
-- the shared one).
-- Returns {'send', new token}, {'failed'}, {'stale'}, {'skip', why} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if tostring(hget(K.slot, 'token')) ~= tostring(A.token) then return {'stale'} end
if not current(A.token, A.states) then return {'skip', tostring(hget(K.slot, 'state'))} end
event({event = A.event, attempt = tonumber(hget(K.slot, 'attempts') or '0'),
       worker = tostring(hget(K.slot, 'worker')), reason = A.reason})
if redis.call('HINCRBY', K.slot, 'bounces', 1) > S.max_bounces then
  give_up(subject() .. ' ' .. A.reason)
  return done({'failed'})
end
redis.call('HDEL', K.slot, 'parked_since', 'parked_reason')
local newtok = resend_slot(slot, A.route)
if A.affinity then redis.call('HSET', K.slot, 'affinity', '1') end
redis.call('PUBLISH', channel, 'requeued')
return {'send', tostring(newtok)}
