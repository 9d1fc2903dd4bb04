-- refund.lua: an attempt that died of memory (the kernel's OOM killer took pool child `pid` of
-- `worker`: Scheduler.died_of_memory) after the reaper had already requeued it as lost (its
-- lease ran out first): that attempt is not counted after all, and the worker is excluded
-- from the slot (requeue.lua recorded who made the attempt it requeued: lost_worker, lost_pid).
-- args: worker pid reason
-- Returns {'refunded'}, {'skip'} (not that attempt, or refunded already) or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if tostring(hget(K.slot, 'lost_worker')) ~= A.worker or tostring(hget(K.slot, 'lost_pid')) ~= tostring(A.pid) then
  return {'skip'}
end
redis.call('HDEL', K.slot, 'lost_worker', 'lost_pid')
local attempts = tonumber(hget(K.slot, 'attempts') or '0')
if attempts > 0 then redis.call('HSET', K.slot, 'attempts', attempts - 1) end
add_word(K.slot, 'excluded', A.worker)
event({event = 'oom', attempt = attempts, worker = A.worker, reason = A.reason, refunded = true})
return {'refunded'}
