-- record.lua: stores a partition's self-checked proof once (HSETNX), notes that its build
-- proves this key validly (suspect.lua weighs it), folds the attempt's timings into the
-- runtime averages (fold_runtime), and, when every partition has now ended, elects the
-- finalize step (in the same script: a worker dying between storing the last proof and
-- electing would leave nobody to finalize).
-- args: token worker payload build field prove_s key_load_s checked take seen attempt witness invalid_fps
-- keys: runtime
-- payload: the result as a JSON object's text (proof, public signals, fingerprint, timings,
-- worker), stored with "recorded_at" (Redis's time) added;
-- build: the recording worker's kernel build hash; field: "{zkey sha256}|{device class}"
-- ('' = measure nothing), prove_s and key_load_s (0: the key was loaded already) its timings;
-- checked and take: the independent checks this worker made and takes (exchange_checks).
-- seen: the job's `taken` count this attempt's claim returned ('' = none), with attempt,
-- witness and invalid_fps as that claim read them. While nothing was taken since
-- (untaken_since), the slot is this attempt's, running, and its fields are what the claim
-- read: it is not read again (the holder's own second record is fenced by HSETNX).
-- Otherwise it is read and fenced by its token.
-- Returns {'recorded', fingerprints...} where the fingerprints are those whose proofs of this
-- partition failed before (the caller strikes them: strike.lua), with "finalize=<token>" last
-- when it elected finalize, and after 'check' the proofs of other workers to verify
-- (exchange_checks: index, token, witness, result, ...); or {'duplicate'}, {'stale'}, {'job_over'}.
local j = job_fields(RECORDER_READS)
if not live(j.state) then return {'job_over'} end
local f
if untaken_since(A.seen, j.taken) then
  f = {A.token, 'running', A.worker, A.attempt, A.invalid_fps, A.witness}
else
  f = redis.call('HMGET', K.slot, 'token', 'state', 'worker', 'attempts', 'invalid_fps', 'witness')
end
if tostring(f[1]) ~= tostring(A.token) or f[2] ~= 'running' or f[3] ~= A.worker then return {'stale'} end
local results = job_prefix .. ':results'
if redis.call('HSETNX', results, slot, stamped(A.payload)) == 0 then return {'duplicate'} end
-- The counts move in after_recording (running -> proved), with the job's other fields.
redis.call('HSET', K.slot, 'state', 'proved', 'finished_at', now_s, 'producer', A.worker)
-- A running slot's one deadline is its lease, in zkq:deadlines (claim.lua took it off
-- zkq:checks and zkq:routed; refresh.lua only moves it there).
redis.call('ZREM', K.deadlines, member)
event({event = 'proved', attempt = tonumber(f[4] or '0'), worker = A.worker})
after_recording(j, 1, K.runtime, A.build, A.field, A.prove_s, A.key_load_s)
local out = {'recorded'}
for _, fp in ipairs(words(f[5])) do table.insert(out, fp) end
local to_check = exchange_checks(A.checked, {slot .. '|' .. tostring(A.token) .. '|' .. A.worker .. '|' .. tostring(f[6])},
                                 elected and 0 or A.take, A.worker)     -- none after the last proof
if #to_check > 0 then
  table.insert(out, 'check')
  for _, v in ipairs(to_check) do table.insert(out, v) end
end
return done(out)
