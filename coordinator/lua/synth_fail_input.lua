-- synth_fail_input.lua: the inputs do not fit the circuit (an unknown signal, a wrong count,
-- a value outside the field, a failed assert): the same input fails the same way everywhere,
-- so the job fails now with the reason, naming the slot. Not retried.
-- ARGV[8] synth token   ARGV[9] worker   ARGV[10] reason
-- Returns 1, or 0 when the attempt was not current or the job already over.
local token, worker, reason = ARGV[8], ARGV[9], ARGV[10]
if not live(redis.call('HGET', KEYS[1], 'state')) then return 0 end
if redis.call('HGET', KEYS[2], 'synth_token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'synthesizing'
   or redis.call('HGET', KEYS[2], 'synth_worker') ~= worker then return 0 end
redis.call('HSET', KEYS[2], 'state', 'failed', 'finished_at', now_s)
-- end_job drops the partitions' own deadline members, not the synthesis ones.
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
for i = 0, n - 1 do redis.call('ZREM', KEYS[3], job_id .. sep .. 's' .. i) end
event({event = 'input_error', attempt = tonumber(redis.call('HGET', KEYS[2], 'synth_attempts') or '0'),
       worker = worker, reason = reason})
fail_job(reason, slot)
return 1
