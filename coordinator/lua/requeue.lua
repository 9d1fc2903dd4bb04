-- requeue.lua: a running attempt ended without a result for a reason another attempt may not
-- share (its worker died or hung: the reaper; an unexpected error: the task). It counts as an
-- attempt: the slot goes back to `sending` with a new token, or, when the attempts are
-- spent, the partition fails (the job, for finalize). The caller sends the message.
-- With refund, the attempt is not counted: it died of memory on a worker too small for its
-- key (the kernel's OOM killer), which says nothing against the partition.
-- args: token event reason exclude route require_expired refund
-- settings: max_attempts
-- exclude: a worker never to take this slot again ('' = none); route: a worker's own queue
-- ('' = the shared one); require_expired: act only if the slot's deadline has passed (the
-- reaper's check, repeated here where it cannot race a refresh).
-- Returns {'send', new token}, {'failed'} (given up with the reason), {'stale'},
-- {'skip', why} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if tostring(hget(K.slot, 'token')) ~= tostring(A.token) then return {'stale'} end
if not current(A.token, 'running') then return {'skip', tostring(hget(K.slot, 'state'))} end
if A.require_expired and tonumber(redis.call('ZSCORE', K.deadlines, member) or '0') > now then
  return {'skip', 'lease alive'}
end
local attempts = tonumber(hget(K.slot, 'attempts') or '0')
event({event = A.event, attempt = attempts, worker = tostring(hget(K.slot, 'worker')), reason = A.reason,
       refunded = A.refund or nil})
if A.refund then
  attempts = attempts - 1
  redis.call('HSET', K.slot, 'attempts', attempts)
else    -- who made it: should it turn out to have died of memory, refund.lua refunds it
  redis.call('HSET', K.slot, 'lost_worker', tostring(hget(K.slot, 'worker')), 'lost_pid', tostring(hget(K.slot, 'pid')))
end
if attempts >= S.max_attempts then
  give_up(subject() .. ' gave up after ' .. attempts .. ' attempts; last: ' .. A.reason)
  return done({'failed'})
end
if A.exclude ~= '' then add_word(K.slot, 'excluded', A.exclude) end
local newtok = resend_slot(slot, A.route)
redis.call('PUBLISH', channel, 'requeued')
return {'send', tostring(newtok)}
