-- fail_input.lua: the attempt found bad input (the same input fails the same way everywhere):
-- the job fails now with the reason, naming the partition.
-- args: token worker reason
-- Returns 1, or 0 when the attempt was not current (stale) or the job already over.
if not live(hget(K.job, 'state')) or not current(A.token, 'running', A.worker) then return 0 end
redis.call('HSET', K.slot, 'state', 'failed', 'finished_at', now_s)
event({event = 'input_error', attempt = tonumber(hget(K.slot, 'attempts') or '0'), worker = A.worker,
       reason = A.reason})
fail_job(A.reason)
return 1
