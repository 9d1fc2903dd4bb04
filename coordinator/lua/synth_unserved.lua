-- synth_unserved.lua: a queued synthesis was checked while workers are alive but none of them
-- takes synthesis (e.g. a fleet of GPU workers only, which prove but do not synthesize by
-- default). Waiting for workers is normal; waiting on a fleet that will never take the work is
-- not: after orphan_timeout_s of that the job fails with the reason. Once a worker that
-- synthesizes is alive again (unserved = '0') the clock starts over.
-- ARGV[8] synth token   ARGV[9] unserved ('1': workers alive, none synthesizes)
-- ARGV[10] orphan_timeout_s   ARGV[11] the reason the job fails with
-- Returns {'waiting'}, {'served'}, {'failed'} or {'skip'}.
local token, unserved, timeout_s, reason = ARGV[8], ARGV[9] == '1', tonumber(ARGV[10]), ARGV[11]
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'skip'} end
if redis.call('HGET', KEYS[2], 'synth_token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'synth_queued' then
  return {'skip'}
end
if not unserved then
  redis.call('HDEL', KEYS[2], 'unserved_since')
  return {'served'}
end
local since = tonumber(redis.call('HGET', KEYS[2], 'unserved_since') or '')
if not since then
  redis.call('HSET', KEYS[2], 'unserved_since', now_s)
  return {'waiting'}
end
if now - since < timeout_s then return {'waiting'} end
event({event = 'failed', reason = reason})
fail_job(label(slot) .. ': its witness cannot be computed: ' .. reason, slot)
return {'failed'}
