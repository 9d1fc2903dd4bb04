-- suspect.lua: a worker's proof of this partition failed its own verification. That is what a
-- bad build or a failing device produces, so the worker is excluded from the partition and
-- its fingerprint recorded; the witness is blamed only when proofs from two different builds
-- have failed for it.
-- args: token worker fingerprint_id build fingerprint reason
-- keys: fingerprints
-- fingerprint: the worker's fingerprint as JSON text; build: its kernel build hash.
-- Returns {'retry'} (re-prove elsewhere), {'unsatisfied', builds...} (the job failed),
-- {'stale'} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if not current(A.token, 'running', A.worker) then return {'stale'} end
redis.call('HSET', K.fingerprints, A.fingerprint_id, A.fingerprint)
redis.call('RPUSH', job_prefix .. ':bad', cjson.encode({index = tonumber(slot), worker = A.worker,
    fingerprint = cjson.decode(A.fingerprint), reason = A.reason, at = now}))
add_word(K.slot, 'excluded', A.worker)
add_word(K.slot, 'invalid_fps', A.fingerprint_id)
add_word(K.slot, 'invalid_builds', A.build)
event({event = 'invalid', attempt = tonumber(hget(K.slot, 'attempts') or '0'), worker = A.worker,
       fingerprint = A.fingerprint_id, reason = A.reason})
-- Not a spent attempt: exclusion already keeps one worker from failing a slot twice, and a
-- fleet with several bad workers must not use up the attempts a good one needs.
redis.call('HINCRBY', K.slot, 'attempts', -1)
local builds = words(hget(K.slot, 'invalid_builds'))
if #builds >= 2 then
  redis.call('HSET', K.slot, 'state', 'failed', 'finished_at', now_s)
  fail_job(label() .. ': the witness does not satisfy the circuit\'s constraints: its proofs from ' ..
           #builds .. ' different builds (' .. table.concat(builds, ', ') .. ') all fail verification')
  local out = {'unsatisfied'}
  for _, b in ipairs(builds) do table.insert(out, b) end
  return out
end
return {'retry'}
