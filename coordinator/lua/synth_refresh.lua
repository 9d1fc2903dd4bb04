-- synth_refresh.lua: the worker computing a witness says it is alive; its lease is extended,
-- never past the attempt's run deadline.
-- ARGV[8] synth token   ARGV[9] worker   ARGV[10] lease_ttl_s
-- Returns 'ok', 'overdue', 'lost' (someone else holds the slot now) or 'job_over'.
local token, worker, lease_ttl_s = ARGV[8], ARGV[9], tonumber(ARGV[10])
local smember = job_id .. sep .. 's' .. slot
if not live(redis.call('HGET', KEYS[1], 'state')) then return 'job_over' end
if redis.call('HGET', KEYS[2], 'synth_token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'synthesizing'
   or redis.call('HGET', KEYS[2], 'synth_worker') ~= worker then return 'lost' end
local run_deadline = tonumber(redis.call('HGET', KEYS[2], 'synth_run_deadline') or '0')
if now >= run_deadline then return 'overdue' end
redis.call('ZADD', KEYS[3], math.min(now + lease_ttl_s, run_deadline), smember)
return 'ok'
