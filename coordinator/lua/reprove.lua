-- reprove.lua: finalize found invalid or malformed partition results: drop them, exclude and
-- record the workers that produced them, and put those partitions back to `sending`.
-- KEYS[6] results hash   KEYS[7] finalize slot (= KEYS[2])   KEYS[8] zkq:job:{job}:bad
-- KEYS[9] zkq:fingerprints   KEYS[10..] the slot of each bad partition, in ARGV order
-- ARGV[8] finalize token   ARGV[9] max_attempts   ARGV[10] send_grace_s
-- then per bad partition 6 values: index, worker, fingerprint id, fingerprint (JSON), reason, route
-- Returns {'send', index, token, index, token, ...}, {'failed'}, {'stale'} or {'job_over'}.
local token, max_attempts, send_grace_s = ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
if redis.call('HGET', KEYS[7], 'token') ~= token or redis.call('HGET', KEYS[7], 'state') ~= 'running' then
  return {'stale'}
end
local out = {'send'}
local k = 0
for a = 11, #ARGV, 6 do
  k = k + 1
  local key, idx, worker, fp, fingerprint, reason, route =
    KEYS[9 + k], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
  redis.call('RPUSH', KEYS[8], cjson.encode({index = tonumber(idx), worker = worker,
      fingerprint = cjson.decode(fingerprint), reason = reason, at = now}))
  if fp ~= '' then
    redis.call('HSET', KEYS[9], fp, fingerprint)
    add_word(key, 'invalid_fps', fp)
  end
  local attempts = tonumber(redis.call('HGET', key, 'attempts') or '0')
  event({slot = idx, event = 'invalid', attempt = attempts, worker = worker, fingerprint = fp, reason = reason})
  if attempts >= max_attempts then
    fail_job(label(idx) .. ': proof still invalid after ' .. attempts .. ' attempts (last by worker ' ..
             worker .. ')', idx)
    return {'failed'}
  end
  redis.call('HDEL', KEYS[6], idx)
  add_word(key, 'excluded', worker)
  table.insert(out, idx)
  table.insert(out, tostring(resend_slot(key, job_id .. sep .. idx, route, send_grace_s)))
end
redis.call('HDEL', KEYS[1], 'finalize_sent')
redis.call('HSET', KEYS[7], 'state', 'idle', 'finished_at', now_s)
redis.call('ZREM', KEYS[3], member)
redis.call('PUBLISH', channel, 'requeued')
return out
