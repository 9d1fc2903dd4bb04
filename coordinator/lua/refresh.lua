-- refresh.lua: the lease holder says it is alive; the lease is extended, but never past the
-- attempt's run deadline: a process that is alive but not progressing (a hung kernel) loses
-- the slot all the same.
-- ARGV[8] token   ARGV[9] worker   ARGV[10] lease_ttl_s
-- Returns 'ok', 'overdue' (past the run deadline: the reaper takes it), 'lost' (someone else
-- holds the slot now) or 'job_over'.
local token, worker, lease_ttl_s = ARGV[8], ARGV[9], tonumber(ARGV[10])
if not live(redis.call('HGET', KEYS[1], 'state')) then return 'job_over' end
if redis.call('HGET', KEYS[2], 'token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'running'
   or redis.call('HGET', KEYS[2], 'worker') ~= worker then return 'lost' end
local run_deadline = tonumber(redis.call('HGET', KEYS[2], 'run_deadline') or '0')
if now >= run_deadline then return 'overdue' end
redis.call('ZADD', KEYS[3], math.min(now + lease_ttl_s, run_deadline), member)
return 'ok'
