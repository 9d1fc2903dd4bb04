-- submit.lua: creates a job, or finds the job of a request id seen before. With witnesses,
-- every partition starts `queued` (token 1). With circuit inputs, every witness slot "s{i}"
-- starts `queued` and partition i stays idle until its witness exists.
-- A new slot's first check is due send_grace_s from now, as a `sending` slot's resend would
-- be: the caller sends the messages, then arms each slot's regular check (arm_checks.lua, a
-- ZADD per chunk, no slot read or written); a caller that died before sending leaves the
-- check to find the message on no queue and send it again (same token). So a submitted slot
-- is written once, not again when its message is sent.
-- args: request_id priority zkey witnesses inputs wasm wasm_name r1cs all_or_nothing
-- keys: jobs
-- witnesses: {sha, name} per partition ([] for an inputs job); inputs: {sha, name} per
-- partition ([] for a witness job); r1cs: the circuit's .r1cs (sha256, '' = none), checked
-- against a witness whose proof fails; all_or_nothing: any failed partition fails the job.
-- The caller sends the message of every slot it created, then calls arm_checks.lua.
-- Returns {'created', job} or {'exists', the earlier job}.
if A.request_id ~= '' then
  local request_key = C.prefix .. ':request:' .. A.request_id
  local existing = redis.call('GET', request_key)
  if existing then return {'exists', existing} end
  redis.call('SET', request_key, job_id)
end
local n = math.max(#A.witnesses, #A.inputs)
redis.call('HSET', K.job, 'state', 'queued', 'priority', A.priority, 'zkey', A.zkey, 'n', n,
           'created_at', now_s, 'request_id', A.request_id, 'wasm', A.wasm, 'wasm_name', A.wasm_name,
           'r1cs', A.r1cs, 'all_or_nothing', A.all_or_nothing and '1' or '0', 'failed', 0,
           'inputs', #A.inputs > 0 and '1' or '0')
redis.call('HSET', K.slot, 'token', 0, 'attempts', 0)
move(slot, 'idle')
-- The slots are new: their states are counted once per kind and state, not slot by slot.
local counts, queued = {}, {}
local function new_slot(s, state, token, ...)
  redis.call('HSET', slot_key(s), 'state', state, 'token', token, 'attempts', 0, 'enqueued_at', now_s,
             'routed_to', '', ...)
  local c = 'c:' .. kind_of(s) .. ':' .. state
  counts[c] = (counts[c] or 0) + 1
  if state == 'queued' then table.insert(queued, member_of(s)) end
end
for i = 0, n - 1 do
  if #A.inputs > 0 then
    new_slot('s' .. i, 'queued', 1, 'input', A.inputs[i + 1].sha, 'input_name', A.inputs[i + 1].name)
    new_slot(tostring(i), 'idle', 0)
  else
    new_slot(tostring(i), 'queued', 1, 'witness', A.witnesses[i + 1].sha, 'witness_name', A.witnesses[i + 1].name)
  end
end
for c, count in pairs(counts) do redis.call('HINCRBY', K.job, c, count) end
-- Every queued slot's first check, in a few ZADDs rather than one per slot.
zadd_all(K.checks, now + S.send_grace_s, queued)
redis.call('ZADD', K.jobs, now, job_id)
return {'created', job_id}
