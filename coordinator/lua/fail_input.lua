-- fail_input.lua: the attempt found bad input (the same input fails the same way everywhere):
-- the job fails now with the reason, naming the slot.
-- ARGV[8] token   ARGV[9] worker   ARGV[10] reason
-- Returns 1, or 0 when the attempt was not current (stale) or the job already over.
local token, worker, reason = ARGV[8], ARGV[9], ARGV[10]
if not live(redis.call('HGET', KEYS[1], 'state')) then return 0 end
if redis.call('HGET', KEYS[2], 'token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'running'
   or redis.call('HGET', KEYS[2], 'worker') ~= worker then return 0 end
redis.call('HSET', KEYS[2], 'state', 'failed', 'finished_at', now_s)
event({event = 'input_error', attempt = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0'),
       worker = worker, reason = reason})
fail_job(reason, slot)
return 1
