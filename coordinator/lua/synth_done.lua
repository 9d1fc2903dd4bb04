-- synth_done.lua: the witness of a partition is computed and stored: record its sha256 and
-- put the partition in `sending` (token + 1) at once, so it is proved while later witnesses
-- are still being computed. The caller sends the prove message.
-- ARGV[8] synth token   ARGV[9] worker   ARGV[10] witness sha256   ARGV[11] synth_s
-- ARGV[12] send_grace_s
-- Returns {'send', partition token}, {'stale'} or {'job_over'}.
local token, worker, witness, synth_s, send_grace_s =
  ARGV[8], ARGV[9], ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12])
local smember = job_id .. sep .. 's' .. slot
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
if redis.call('HGET', KEYS[2], 'synth_token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'synthesizing'
   or redis.call('HGET', KEYS[2], 'synth_worker') ~= worker then return {'stale'} end
redis.call('HSET', KEYS[2], 'witness', witness, 'synth_finished_at', now_s, 'synth_s', string.format('%.6f', synth_s))
redis.call('ZREM', KEYS[3], smember)
event({event = 'synthesized', attempt = tonumber(redis.call('HGET', KEYS[2], 'synth_attempts') or '0'),
       worker = worker, synth_s = synth_s})
local tok = resend_slot(KEYS[2], member, '', send_grace_s)
redis.call('PUBLISH', channel, 'synthesized')
return {'send', tostring(tok)}
