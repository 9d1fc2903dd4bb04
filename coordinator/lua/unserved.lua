-- unserved.lua: a queued witness slot ("s{i}") was checked while workers are alive but none
-- of them takes witness synthesis (e.g. a fleet of GPU workers only, which prove but do not
-- synthesize by default). Waiting for workers is normal; waiting on a fleet that will never
-- take the work is not: after orphan_timeout_s of that the job fails with the reason. Once a
-- worker that synthesizes is alive again (unserved false) the clock starts over.
-- args: token unserved reason
-- settings: orphan_timeout_s
-- Returns {'waiting'}, {'served'}, {'failed'} or {'skip'}.
if not live(hget(K.job, 'state')) or not current(A.token, 'queued') then return {'skip'} end
if not A.unserved then
  redis.call('HDEL', K.slot, 'unserved_since')
  return {'served'}
end
local since = tonumber(hget(K.slot, 'unserved_since') or '')
if not since then
  redis.call('HSET', K.slot, 'unserved_since', now_s)
  return {'waiting'}
end
if now - since < S.orphan_timeout_s then return {'waiting'} end
event({event = 'failed', reason = A.reason})
fail_partition(label() .. ': its witness cannot be computed: ' .. A.reason)
return done({'failed'})
