-- park.lua: no eligible worker is alive for this slot (every live one is excluded from it or
-- quarantined). Rather than bounce its message between workers that may not take it, the
-- slot waits with no message anywhere and holds no worker: the reaper looks at it every tick
-- (reap.lua), sends it to the first eligible worker to appear (reroute.lua), and gives it
-- up after orphan_timeout_s parked with `reason`. `needs` (JSON, or '') is the memory a worker
-- must have to take it (a partition too big for every live worker): the reaper sends it only
-- to one that has it.
-- args: token states reason needs
-- settings: reaper_interval_s
-- Returns {'parked'}, {'stale'}, {'skip', why} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if tostring(hget(K.slot, 'token')) ~= tostring(A.token) then return {'stale'} end
if not current(A.token, A.states) then return {'skip', tostring(hget(K.slot, 'state'))} end
redis.call('HINCRBY', K.slot, 'token', 1)      -- any message still out there is stale now
move(slot, 'parked')
redis.call('HSET', K.slot, 'parked_reason', A.reason, 'routed_to', '', 'needs', A.needs)
if not hget(K.slot, 'parked_since') then redis.call('HSET', K.slot, 'parked_since', now_s) end
deadline_at(member, now + S.reaper_interval_s)
redis.call('ZREM', K.routed, member)
event({event = 'parked', reason = A.reason})
redis.call('PUBLISH', channel, 'parked')
return {'parked'}
