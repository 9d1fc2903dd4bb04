-- record.lua: stores a partition's self-checked proof once (HSETNX) and, when that completes
-- the set, elects the finalize step (in the same script: a worker dying between storing the
-- last proof and electing would leave nobody to finalize).
-- args: token worker payload
-- payload: the result as JSON text (proof, public signals, fingerprint, timings, worker).
-- Returns {'recorded', fingerprints...} or {'finalize', finalize token, fingerprints...},
-- where the fingerprints are those whose proofs of this partition failed before (the caller
-- strikes them: strike.lua), or {'duplicate'}, {'stale'}, {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if not current(A.token, 'running', A.worker) then return {'stale'} end
local results = job_prefix .. ':results'
if redis.call('HSETNX', results, slot, A.payload) == 0 then return {'duplicate'} end
redis.call('HSET', K.slot, 'state', 'proved', 'finished_at', now_s, 'producer', A.worker)
redis.call('ZREM', K.deadlines, member)
redis.call('ZREM', K.routed, member)
event({event = 'proved', attempt = tonumber(hget(K.slot, 'attempts') or '0'), worker = A.worker})
redis.call('PUBLISH', channel, 'proved')
local out = {'recorded'}
if redis.call('HLEN', results) >= tonumber(hget(K.job, 'n'))
   and redis.call('HSETNX', K.job, 'finalize_sent', '1') == 1 then
  -- A fresh election: the finalize step starts over with its own attempt count.
  redis.call('HSET', slot_key('finalize'), 'attempts', 0, 'excluded', '', 'bounces', 0)
  out = {'finalize', tostring(resend_slot('finalize', ''))}
end
for _, fp in ipairs(words(hget(K.slot, 'invalid_fps'))) do table.insert(out, fp) end
return out
