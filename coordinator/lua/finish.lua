-- finish.lua: finalize verified every partition: the job is done.
-- args: token verify_s
-- Returns 1, or 0 when this finalize attempt was not current or the job already over.
if not live(hget(K.job, 'state')) or not current(A.token, 'running') then return 0 end
redis.call('HSET', K.job, 'verify_s', string.format('%.6f', A.verify_s))
redis.call('HSET', K.slot, 'state', 'verified', 'finished_at', now_s)
for i = 0, tonumber(hget(K.job, 'n')) - 1 do redis.call('HSET', slot_key(i), 'state', 'verified') end
event({event = 'done'})
end_job('done')
return 1
