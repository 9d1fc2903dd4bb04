-- record_batch.lua: record.lua for several members of a batch one worker proved, in one
-- transition: each member fenced by its own token (running, held by this worker), each
-- proof stored once, the counts, deadlines and events of all of them written once.
-- args: members worker build field prove_s key_load_s checked take seen
-- keys: runtime
-- members: {index, token, payload} triples of this job (payload: the result as a JSON
-- object's text, stored stamped as record.lua's), each followed by its attempt, witness and
-- invalid_fps when `seen` is given; build, field, prove_s (seconds per proof), key_load_s,
-- checked and take: as record.lua's.
-- seen: the job's `taken` count the batch's claim returned ('' = none): while it has not
-- moved, no member is read (record.lua says why).
-- A member already holding a result is a duplicate: nothing of it changes.
-- Returns {'job_over'}, or {'batch', verdict1, verdict2, ...} in the members' order: 'recorded'
-- (followed by ':' and the fingerprints, comma separated, whose proofs of that partition
-- failed before, when there are any: the caller strikes them), 'duplicate' or 'stale'; with
-- the proofs of other workers to verify after 'check' (as record.lua's), and "finalize=<token>"
-- last when it elected finalize.
local j = job_fields(RECORDER_READS)
if not live(j.state) then return {'job_over'} end
local results = job_prefix .. ':results'
local names = {}
for _, m in ipairs(A.members) do table.insert(names, tostring(m[1])) end
local held = redis.call('HMGET', results, unpack(names))
local out = {'batch'}
local stored, ended, events, fresh = {}, {}, {}, {}
local fenced = untaken_since(A.seen, j.taken)
for i, m in ipairs(A.members) do
  local s, token = names[i], tostring(m[2])
  local f
  if fenced then
    f = {token, 'running', A.worker, m[4], m[6], m[5]}
  else
    f = redis.call('HMGET', slot_key(s), 'token', 'state', 'worker', 'attempts', 'invalid_fps', 'witness')
  end
  local verdict = 'stale'
  if tostring(f[1]) == token and f[2] == 'running' and f[3] == A.worker then
    if held[i] then
      verdict = 'duplicate'
    else
      table.insert(stored, s)
      table.insert(stored, stamped(m[3]))
      redis.call('HSET', slot_key(s), 'state', 'proved', 'finished_at', now_s, 'producer', A.worker)
      table.insert(ended, member_of(s))
      table.insert(fresh, s .. '|' .. token .. '|' .. A.worker .. '|' .. tostring(f[6]))
      table.insert(events, event_json({event = 'proved', slot = s, attempt = tonumber(f[4] or '0'),
                                       worker = A.worker}))
      verdict = 'recorded'
      local fps = words(f[5])
      if #fps > 0 then verdict = verdict .. ':' .. table.concat(fps, ',') end
    end
  end
  table.insert(out, verdict)
end
if #ended > 0 then
  redis.call('HSET', results, unpack(stored))
  -- A running slot's one deadline is its lease, in zkq:deadlines.
  zrem_all(K.deadlines, ended)
  push_events(events)
  after_recording(j, #ended, K.runtime, A.build, A.field, A.prove_s, A.key_load_s)
end
local to_check = exchange_checks(A.checked, fresh, elected and 0 or A.take, A.worker)
if #to_check > 0 then
  table.insert(out, 'check')
  for _, v in ipairs(to_check) do table.insert(out, v) end
end
return done(out)
