-- synth_claim.lua: a worker starts computing a partition's witness (ARGV[2] is its index;
-- the slot's synthesis deadline is the member "{job}|s{index}").
-- ARGV[8] synth token   ARGV[9] worker   ARGV[10] pid   ARGV[11] lease_ttl_s
-- ARGV[12] max_attempts   ARGV[13] run_s: the lease is never extended past started + run_s
-- Returns {'ok', attempt, started_at} or why not: job_over, stale, done, busy.
local token, worker, pid, lease_ttl_s, max_attempts, run_s =
  ARGV[8], ARGV[9], ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local smember = job_id .. sep .. 's' .. slot
local js = redis.call('HGET', KEYS[1], 'state')
if not live(js) then return {'job_over', tostring(js)} end
local tok = redis.call('HGET', KEYS[2], 'synth_token')
if tok ~= token then return {'stale', tostring(tok)} end
local st = tostring(redis.call('HGET', KEYS[2], 'state'))
if st == 'synthesizing' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[3], smember) or '0')
  if dl > now then return {'busy', tostring(redis.call('HGET', KEYS[2], 'synth_worker'))} end
elseif st ~= 'synth_sending' and st ~= 'synth_queued' then
  return {'done', st}
end
local attempts = tonumber(redis.call('HGET', KEYS[2], 'synth_attempts') or '0')
if attempts >= max_attempts then
  event({event = 'gave_up', attempt = attempts})
  fail_job(label(slot) .. ': synthesis of ' .. tostring(redis.call('HGET', KEYS[2], 'input_name')) ..
           ' gave up after ' .. attempts .. ' attempts (last on worker ' ..
           tostring(redis.call('HGET', KEYS[2], 'synth_worker')) .. ')', slot)
  redis.call('ZREM', KEYS[3], smember)
  return {'job_over', 'failed'}
end
attempts = attempts + 1
local run_deadline = now + run_s
redis.call('HSET', KEYS[2], 'state', 'synthesizing', 'synth_attempts', attempts, 'synth_worker', worker,
           'synth_pid', pid, 'synth_started_at', now_s, 'synth_run_deadline', string.format('%.6f', run_deadline))
redis.call('ZADD', KEYS[3], math.min(now + lease_ttl_s, run_deadline), smember)
if js == 'queued' then redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', now_s) end
event({event = 'synth_started', attempt = attempts, worker = worker, pid = tonumber(pid), token = tonumber(token)})
redis.call('PUBLISH', channel, 'synth_started')
return {'ok', tostring(attempts), now_s}
