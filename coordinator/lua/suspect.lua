-- suspect.lua: a worker's proof of this partition failed its own verification. That is what a
-- bad build or a failing device produces far more often than a bad witness, so the worker is
-- excluded from the partition and its fingerprint recorded, and the witness is judged only
-- on good evidence:
--   * proofs from two different builds failed: the witness does not satisfy the circuit;
--   * proofs from two different workers of one build failed, and that build has proved other
--     witnesses of the same key valid (record.lua notes them): the witness does not satisfy it.
-- Then the partition fails alone (tasks/partition.py checks the job's .r1cs, when it has one,
-- before coming here). Nothing is quarantined on this path.
-- args: token worker fingerprint_id build fingerprint reason
-- keys: fingerprints
-- fingerprint: the worker's fingerprint as JSON text; build: its kernel build hash.
-- Returns {'retry'} (re-prove elsewhere), {'unsatisfied', how} (the partition failed),
-- {'stale'} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if not current(A.token, 'running', A.worker) then return {'stale'} end
redis.call('HSET', K.fingerprints, A.fingerprint_id, A.fingerprint)
redis.call('RPUSH', job_prefix .. ':bad', cjson.encode({index = tonumber(slot), worker = A.worker,
    fingerprint = cjson.decode(A.fingerprint), reason = A.reason, at = now}))
add_word(K.slot, 'excluded', A.worker)
add_word(K.slot, 'invalid_fps', A.fingerprint_id)
add_word(K.slot, 'invalid_builds', A.build)
add_word(K.slot, 'invalid_by', A.build .. '|' .. A.worker)
event({event = 'invalid', attempt = tonumber(hget(K.slot, 'attempts') or '0'), worker = A.worker,
       fingerprint = A.fingerprint_id, reason = A.reason})
-- Not a spent attempt: exclusion already keeps one worker from failing a slot twice, and a
-- fleet with several bad workers must not use up the attempts a good one needs.
redis.call('HINCRBY', K.slot, 'attempts', -1)
local how
local builds = words(hget(K.slot, 'invalid_builds'))
if #builds >= 2 then
  how = 'its proofs from ' .. #builds .. ' different builds (' .. table.concat(builds, ', ') ..
        ') all fail verification'
else
  local workers = {}
  for _, entry in ipairs(words(hget(K.slot, 'invalid_by'))) do
    local b, w = string.match(entry, '^(.*)|([^|]*)$')
    if b == A.build then table.insert(workers, w) end
  end
  local valid_key = C.prefix .. ':valid:' .. tostring(hget(K.job, 'zkey'))
  if #workers >= 2 and redis.call('HEXISTS', valid_key, A.build) == 1 then
    how = 'its proofs failed verification on ' .. #workers .. ' workers (' .. table.concat(workers, ', ') ..
          ') of build ' .. A.build .. ', which has proved other witnesses of this key valid'
  end
end
if not how then return {'retry'} end
event({event = 'unsatisfied', reason = how})
fail_partition(label() .. ": the witness does not satisfy the circuit's constraints (" .. source_of(slot) ..
               '): ' .. how)
return done({'unsatisfied', how})
