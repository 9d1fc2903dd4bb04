-- record.lua: stores a partition's self-checked proof once (HSETNX) and, when it completes
-- the set, elects the finalize step. A valid proof here also confirms that every other
-- fingerprint whose proof of this slot failed was at fault: each gets a strike, and a
-- fingerprint with quarantine_after strikes is quarantined fleet-wide.
-- KEYS[6] results hash   KEYS[7] finalize slot   KEYS[8] zkq:strikes   KEYS[9] zkq:quarantine
-- KEYS[10] zkq:fingerprints   KEYS[11] zkq:runtime
-- ARGV[8] token   ARGV[9] worker   ARGV[10] payload (JSON)   ARGV[11] send_grace_s
-- ARGV[12] fingerprint id of the recording worker   ARGV[13] quarantine_after
-- ARGV[14] runtime field ("{zkey}|{device class}")   ARGV[15] prove_s of this attempt
-- ARGV[16] key_load_s of this attempt (0: the key was loaded already)
-- Returns {'recorded'}, {'finalize', token}, {'duplicate'}, {'stale'} or {'job_over'}.
local token, worker, payload, send_grace_s, fp, quarantine_after, runtime_field, prove_s, key_load_s =
  ARGV[8], ARGV[9], ARGV[10], tonumber(ARGV[11]), ARGV[12], tonumber(ARGV[13]), ARGV[14], tonumber(ARGV[15]),
  tonumber(ARGV[16])
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
if redis.call('HGET', KEYS[2], 'token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'running'
   or redis.call('HGET', KEYS[2], 'worker') ~= worker then return {'stale'} end
if redis.call('HSETNX', KEYS[6], slot, payload) == 0 then return {'duplicate'} end
redis.call('HSET', KEYS[2], 'state', 'proved', 'finished_at', now_s, 'producer', worker)
redis.call('ZREM', KEYS[3], member)
redis.call('ZREM', KEYS[5], member)
event({event = 'proved', attempt = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0'), worker = worker})
-- Expected proving (and key loading) time of this key on this kind of device: moving averages.
local function measured(field, seconds)
  local old = tonumber(redis.call('HGET', KEYS[11], field) or '')
  redis.call('HSET', KEYS[11], field, string.format('%.6f', old and (0.7 * old + 0.3 * seconds) or seconds))
end
measured(runtime_field, prove_s)
if key_load_s > 0 then measured(runtime_field .. '|load', key_load_s) end
for _, bad_fp in ipairs(words(redis.call('HGET', KEYS[2], 'invalid_fps'))) do
  if bad_fp ~= fp then
    local strikes = redis.call('HINCRBY', KEYS[8], bad_fp, 1)
    if strikes >= quarantine_after and redis.call('HEXISTS', KEYS[9], bad_fp) == 0 then
      local info = cjson.decode(redis.call('HGET', KEYS[10], bad_fp) or '{}')
      redis.call('HSET', KEYS[9], bad_fp, cjson.encode({fingerprint = info, strikes = strikes, at = now,
        reason = strikes .. ' invalid proofs, each of a witness another build proved valid (last: job ' ..
                 job_id .. ' ' .. label(slot) .. ')'}))
      event({event = 'quarantined', fingerprint = bad_fp, strikes = strikes})
    end
  end
end
redis.call('PUBLISH', channel, 'proved')
local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
if redis.call('HLEN', KEYS[6]) >= n and redis.call('HSETNX', KEYS[1], 'finalize_sent', '1') == 1 then
  -- A fresh election: the finalize step starts over with its own attempt count.
  redis.call('HSET', KEYS[7], 'attempts', 0, 'excluded', '', 'bounces', 0)
  local ftok = resend_slot(KEYS[7], job_id .. sep .. 'finalize', '', send_grace_s)
  return {'finalize', tostring(ftok)}
end
return {'recorded'}
