-- reprove.lua: finalize found invalid or malformed partition results: drop them, exclude and
-- record the workers that produced them, and put those partitions back to `sending`; one
-- whose attempts are spent fails alone. When none is left to re-prove, the job settles at
-- once (a new finalize of the rest, or the job fails when nothing is proved).
-- args: token bad
-- settings: max_attempts
-- keys: fingerprints
-- bad: one object per partition: index, worker, fingerprint_id, fingerprint (JSON text),
-- reason, route (a worker's own queue to re-prove it on; '' = the shared queue).
-- Returns {'send', index, token, index, token, ...} (with "finalize=<token>" last when it
-- settled), {'stale'} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if not current(A.token, 'running') then return {'stale'} end
local out = {'send'}
local spent = {}     -- {index, reason} of partitions whose attempts are spent
for _, b in ipairs(A.bad) do
  local idx = tostring(b.index)
  local key = slot_key(idx)
  redis.call('RPUSH', job_prefix .. ':bad', cjson.encode({index = b.index, worker = b.worker,
      fingerprint = cjson.decode(b.fingerprint), reason = b.reason, at = now}))
  if b.fingerprint_id ~= '' then
    redis.call('HSET', K.fingerprints, b.fingerprint_id, b.fingerprint)
    add_word(key, 'invalid_fps', b.fingerprint_id)
  end
  local attempts = tonumber(hget(key, 'attempts') or '0')
  event({slot = idx, event = 'invalid', attempt = attempts, worker = b.worker, fingerprint = b.fingerprint_id,
         reason = b.reason})
  redis.call('HDEL', job_prefix .. ':results', idx)
  add_word(key, 'excluded', b.worker)
  if attempts >= S.max_attempts then
    table.insert(spent, {idx, label(idx) .. ': proof still invalid after ' .. attempts ..
                              ' attempts (last by worker ' .. b.worker .. ')'})
  else
    table.insert(out, idx)
    table.insert(out, tostring(resend_slot(idx, b.route)))
  end
end
redis.call('HDEL', K.job, 'finalize_sent')
move(slot, 'idle')
redis.call('HSET', K.slot, 'finished_at', now_s)
no_deadline(member)
redis.call('PUBLISH', channel, 'requeued')
for _, item in ipairs(spent) do
  if live(hget(K.job, 'state')) then fail_partition(item[2], item[1]) end
end
return done(out)
