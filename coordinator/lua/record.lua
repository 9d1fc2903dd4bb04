-- record.lua: stores a partition's self-checked proof once (HSETNX), notes that its build
-- proves this key validly (suspect.lua weighs it), and, when every partition has now
-- ended, elects the finalize step (in the same script: a worker dying between storing the
-- last proof and electing would leave nobody to finalize).
-- args: token worker payload build
-- payload: the result as JSON text (proof, public signals, fingerprint, timings, worker);
-- build: the recording worker's kernel build hash.
-- Returns {'recorded', fingerprints...} where the fingerprints are those whose proofs of this
-- partition failed before (the caller strikes them: strike.lua), with "finalize=<token>" last
-- when it elected finalize; or {'duplicate'}, {'stale'}, {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if not current(A.token, 'running', A.worker) then return {'stale'} end
local results = job_prefix .. ':results'
if redis.call('HSETNX', results, slot, A.payload) == 0 then return {'duplicate'} end
move(slot, 'proved')
redis.call('HSET', K.slot, 'finished_at', now_s, 'producer', A.worker)
no_deadline(member)
redis.call('ZREM', K.routed, member)
event({event = 'proved', attempt = tonumber(hget(K.slot, 'attempts') or '0'), worker = A.worker})
redis.call('PUBLISH', channel, 'proved')
local valid_key = C.prefix .. ':valid:' .. tostring(hget(K.job, 'zkey'))
redis.call('HSET', valid_key, A.build, now_s)
redis.call('EXPIRE', valid_key, math.max(1, math.floor(S.result_ttl_s)))
settle()
local out = {'recorded'}
for _, fp in ipairs(words(hget(K.slot, 'invalid_fps'))) do table.insert(out, fp) end
return done(out)
