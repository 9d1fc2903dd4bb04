-- refresh.lua: the lease holder says it is alive; the lease is extended, but never past the
-- attempt's run deadline: a process that is alive but not progressing (a hung kernel) loses
-- the slot all the same.
-- args: token worker
-- settings: lease_ttl_s
-- Returns 'ok', 'overdue' (past the run deadline: the reaper takes it), 'lost' (someone else
-- holds the slot now) or 'job_over'.
if not live(hget(K.job, 'state')) then return 'job_over' end
local f = redis.call('HMGET', K.slot, 'token', 'state', 'worker', 'run_deadline')     -- one read
if tostring(f[1]) ~= tostring(A.token) or f[2] ~= 'running' or f[3] ~= A.worker then return 'lost' end
local run_deadline = tonumber(f[4] or '0')
if now >= run_deadline then return 'overdue' end
-- A running slot's one deadline is its lease, in zkq:deadlines (claim.lua took it off zkq:checks).
redis.call('ZADD', K.deadlines, math.min(now + S.lease_ttl_s, run_deadline), member)
return 'ok'
