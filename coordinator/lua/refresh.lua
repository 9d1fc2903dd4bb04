-- refresh.lua: the lease holder says it is alive; the lease is extended, but never past the
-- attempt's run deadline: a process that is alive but not progressing (a hung kernel) loses
-- the slot all the same.
-- args: token worker
-- settings: lease_ttl_s
-- Returns 'ok', 'overdue' (past the run deadline: the reaper takes it), 'lost' (someone else
-- holds the slot now) or 'job_over'.
if not live(hget(K.job, 'state')) then return 'job_over' end
if not current(A.token, 'running', A.worker) then return 'lost' end
local run_deadline = tonumber(hget(K.slot, 'run_deadline') or '0')
if now >= run_deadline then return 'overdue' end
deadline_at(member, math.min(now + S.lease_ttl_s, run_deadline))
return 'ok'
