-- suspect.lua: a worker's proof of this slot failed its own verification. That is what a
-- bad build or a failing device produces, so the worker is excluded from the slot and its
-- fingerprint recorded; the witness is blamed only when proofs from two different builds
-- have failed for this slot.
-- KEYS[6] zkq:job:{job}:bad   KEYS[7] zkq:fingerprints
-- ARGV[8] token   ARGV[9] worker   ARGV[10] fingerprint id   ARGV[11] build (kernel build hash)
-- ARGV[12] fingerprint (JSON)   ARGV[13] reason
-- Returns {'retry'} (re-prove elsewhere), {'unsatisfied', builds...} (the job failed),
-- {'stale'} or {'job_over'}.
local token, worker, fp, build, fingerprint, reason =
  ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13]
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
if redis.call('HGET', KEYS[2], 'token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'running'
   or redis.call('HGET', KEYS[2], 'worker') ~= worker then return {'stale'} end
redis.call('HSET', KEYS[7], fp, fingerprint)
redis.call('RPUSH', KEYS[6], cjson.encode({index = tonumber(slot), worker = worker, fingerprint = cjson.decode(fingerprint),
                                          reason = reason, at = now}))
add_word(KEYS[2], 'excluded', worker)
add_word(KEYS[2], 'invalid_fps', fp)
add_word(KEYS[2], 'invalid_builds', build)
event({event = 'invalid', attempt = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0'), worker = worker,
       fingerprint = fp, reason = reason})
-- Not a spent attempt: exclusion already keeps one worker from failing a slot twice, and a
-- fleet with several bad workers must not use up the attempts a good one needs.
redis.call('HINCRBY', KEYS[2], 'attempts', -1)
local builds = words(redis.call('HGET', KEYS[2], 'invalid_builds'))
if #builds >= 2 then
  redis.call('HSET', KEYS[2], 'state', 'failed', 'finished_at', now_s)
  fail_job(label(slot) .. ': the witness does not satisfy the circuit\'s constraints: its proofs from ' ..
           #builds .. ' different builds (' .. table.concat(builds, ', ') .. ') all fail verification', slot)
  local out = {'unsatisfied'}
  for _, b in ipairs(builds) do table.insert(out, b) end
  return out
end
return {'retry'}
