-- claim_batch.lua: a worker starts attempts on up to max_batch partitions of one job (one
-- key) in one transition: the partition its message names (the lead, exactly as claim.lua
-- claims it) and queued companions found among the next `scan` partitions after it.
-- args: token worker pid fingerprint run_s max_batch scan
-- settings: lease_ttl_s max_attempts
-- keys: quarantine
-- Every claimed partition keeps its own token (its current one), attempt count, lease (its
-- own deadline in zkq:deadlines, refreshed by refresh.lua) and run deadline, so record.lua,
-- refresh.lua, requeue.lua and the reaper treat each exactly as a partition claimed alone.
-- A companion is taken only when it is `queued` (its message sits on a queue: whoever takes
-- that message later finds it busy or proved, and its token fences everything), not routed
-- to another worker's own queue, this worker not excluded from it, and attempts left (one
-- whose attempts are spent is left for its own message to give up). The scan is bounded
-- (at most `scan` slots read), so a claim costs O(max_batch), whatever the job's size.
-- Returns {'ok', started_at, lead_attempt, i1, token1, attempt1, ...} (the lead first), or
-- why the lead cannot be claimed, as claim.lua: job_over, stale, done, busy, excluded,
-- quarantined, gave_up (then no companion is claimed either).
local js = hget(K.job, 'state')
if not live(js) then return {'job_over', tostring(js)} end
if kind ~= 'prove' then return {'done', 'not a partition'} end
local tok = hget(K.slot, 'token')
if tostring(tok) ~= tostring(A.token) then return {'stale', tostring(tok)} end
local st = tostring(hget(K.slot, 'state'))
if st == 'running' then
  if tonumber(redis.call('ZSCORE', K.deadlines, member) or '0') > now then
    return {'busy', tostring(hget(K.slot, 'worker'))}
  end
elseif st ~= 'sending' and st ~= 'queued' then
  return {'done', st}
end
if A.fingerprint ~= '' and redis.call('HEXISTS', K.quarantine, A.fingerprint) == 1 then
  return {'quarantined', A.fingerprint}
end
local excluded = hget(K.slot, 'excluded')
if contains(excluded, A.worker) then return {'excluded', excluded} end
local attempts = tonumber(hget(K.slot, 'attempts') or '0')
if attempts >= S.max_attempts then
  event({event = 'gave_up', attempt = attempts})
  give_up(subject() .. ' gave up after ' .. attempts .. ' attempts (last on worker ' ..
          tostring(hget(K.slot, 'worker')) .. ')')
  return done({'gave_up'})
end

local run_deadline = now + A.run_s
local lease_deadline = math.min(now + S.lease_ttl_s, run_deadline)
-- Starts attempt `n` of partition `s` (whose checks the caller made) under `token`.
local function start(s, token, n)
  local key, m = slot_key(s), member_of(s)
  move(s, 'running')
  redis.call('HINCRBY', K.job, 'attempts', 1)
  redis.call('HSET', key, 'attempts', n, 'worker', A.worker, 'pid', A.pid, 'started_at', now_s,
             'run_deadline', string.format('%.6f', run_deadline), 'fingerprint', A.fingerprint)
  deadline_at(m, lease_deadline)
  redis.call('ZREM', K.routed, m)
  event({event = 'started', slot = s, attempt = n, worker = A.worker, pid = A.pid, token = token, batch = slot})
end

start(slot, A.token, attempts + 1)
local out = {'ok', now_s, tostring(attempts + 1), slot, tostring(A.token), tostring(attempts + 1)}
local n = tonumber(hget(K.job, 'n') or '0')
local taken, lead = 1, tonumber(slot)
for step = 1, math.min(A.scan, n - 1) do
  if taken >= A.max_batch then break end
  local s = tostring((lead + step) % n)
  local key = slot_key(s)
  local f = redis.call('HMGET', key, 'state', 'token', 'routed_to', 'excluded', 'attempts')
  local routed = f[3] or ''
  local spent = tonumber(f[5] or '0')
  if f[1] == 'queued' and (routed == '' or routed == A.worker) and not contains(f[4], A.worker)
     and spent < S.max_attempts then
    start(s, tostring(f[2]), spent + 1)
    for _, v in ipairs({s, tostring(f[2]), tostring(spent + 1)}) do table.insert(out, v) end
    taken = taken + 1
  end
end
if js == 'queued' then redis.call('HSET', K.job, 'state', 'running', 'started_at', now_s) end
redis.call('PUBLISH', channel, 'started')
return out
