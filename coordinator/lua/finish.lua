-- finish.lua: finalize verified every partition: the job is done.
-- KEYS[6..] the partition slots   ARGV[8] finalize token   ARGV[9] verify_s
-- Returns 1, or 0 when this finalize attempt was not current or the job already over.
local token, verify_s = ARGV[8], ARGV[9]
if not live(redis.call('HGET', KEYS[1], 'state')) then return 0 end
if redis.call('HGET', KEYS[2], 'token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'verify_s', verify_s)
redis.call('HSET', KEYS[2], 'state', 'verified', 'finished_at', now_s)
for k = 6, #KEYS do redis.call('HSET', KEYS[k], 'state', 'verified') end
event({event = 'done'})
end_job('done')
return 1
