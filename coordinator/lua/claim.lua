-- claim.lua: a worker starts an attempt on a slot.
-- KEYS[6] zkq:quarantine
-- ARGV[8] token   ARGV[9] worker   ARGV[10] pid   ARGV[11] lease_ttl_s   ARGV[12] max_attempts
-- ARGV[13] the worker's fingerprint id   ARGV[14] run_s: how long this attempt may run
--   before it is overdue (its lease is never extended past started + run_s)
-- Returns {'ok', attempt, started_at} or why not: job_over, stale, done, busy, excluded, quarantined.
local token, worker, pid, lease_ttl_s, max_attempts, fp, run_s =
  ARGV[8], ARGV[9], ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13], tonumber(ARGV[14])
local js = redis.call('HGET', KEYS[1], 'state')
if not live(js) then return {'job_over', tostring(js)} end
local tok = redis.call('HGET', KEYS[2], 'token')
if tok ~= token then return {'stale', tostring(tok)} end
local st = redis.call('HGET', KEYS[2], 'state')
if st == 'proved' or st == 'verified' or st == 'failed' then return {'done', st} end
if st == 'running' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[3], member) or '0')
  if dl > now then return {'busy', tostring(redis.call('HGET', KEYS[2], 'worker'))} end
end
if fp ~= '' and redis.call('HEXISTS', KEYS[6], fp) == 1 then return {'quarantined', fp} end
local excluded = redis.call('HGET', KEYS[2], 'excluded')
if contains(excluded, worker) then return {'excluded', excluded} end
local attempts = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0')
if attempts >= max_attempts then
  event({event = 'gave_up', attempt = attempts})
  fail_job(label(slot) .. ': gave up after ' .. attempts .. ' attempts (last on worker ' ..
           tostring(redis.call('HGET', KEYS[2], 'worker')) .. ')', slot)
  return {'job_over', 'failed'}
end
attempts = attempts + 1
local run_deadline = now + run_s
redis.call('HSET', KEYS[2], 'state', 'running', 'attempts', attempts, 'worker', worker, 'pid', pid,
           'started_at', now_s, 'run_deadline', string.format('%.6f', run_deadline), 'fingerprint', fp)
redis.call('ZADD', KEYS[3], math.min(now + lease_ttl_s, run_deadline), member)
redis.call('ZREM', KEYS[5], member)
if js == 'queued' then redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', now_s) end
event({event = 'started', attempt = attempts, worker = worker, pid = tonumber(pid), token = tonumber(token)})
redis.call('PUBLISH', channel, 'started')
return {'ok', tostring(attempts), now_s}
