-- finish.lua: finalize verified every proved partition: the job is done, or done with
-- failures when some partitions failed alone (their reasons are on their slots).
-- args: token verify_s
-- Returns 1, or 0 when this finalize attempt was not current or the job already over.
if not live(hget(K.job, 'state')) or not current(A.token, 'running') then return 0 end
redis.call('HSET', K.job, 'verify_s', string.format('%.6f', A.verify_s))
move(slot, 'verified')
redis.call('HSET', K.slot, 'finished_at', now_s)
-- The proved partitions are those with a result (a proof dropped by reprove.lua took its
-- partition out of `proved`; every partition has ended, so none changes meanwhile). Each is
-- verified now, which its slot does not say: a partition `proved` in a done job is verified
-- (the client reads it so: coordinator/client.py), and the job's counts say it here, changed
-- once for all of them, rather than a write to every partition's slot.
local verified = redis.call('HLEN', job_prefix .. ':results')
if verified > 0 then
  redis.call('HINCRBY', K.job, 'c:prove:proved', -verified)
  redis.call('HINCRBY', K.job, 'c:prove:verified', verified)
end
event({event = 'done'})
end_job(tonumber(hget(K.job, 'failed') or '0') > 0 and 'done-with-failures' or 'done')
return 1
