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
local j = redis.call('HMGET', K.job, 'state', 'n', 'notified_at')
local js = j[1]
if not live(js) then return {'job_over', tostring(js)} end
if kind ~= 'prove' then return {'done', 'not a partition'} end
-- The lead's fields in one read.
local lf = redis.call('HMGET', K.slot, 'token', 'state', 'worker', 'excluded', 'attempts', 'routed_to')
local refused = claim_refusal(lf, {token = A.token, worker = A.worker, fingerprint = A.fingerprint},
                              K.quarantine, S.max_attempts)
if refused then return refused end
local st = tostring(lf[2])
local attempts = tonumber(lf[5] or '0')

local run_deadline = now + A.run_s
local lease_deadline = math.min(now + S.lease_ttl_s, run_deadline)
-- How many members left each state (counted once for the whole batch, not member by member).
local left = {}
-- Starts attempt `n` of partition `s` (whose checks the caller made) under `token`; `old`: its
-- state, `routed`: its routed_to, as the caller read them.
local function start(s, token, n, old, routed)
  local key, m = slot_key(s), member_of(s)
  if old ~= 'running' then left[old] = (left[old] or 0) + 1 end
  redis.call('HSET', key, 'state', 'running', 'attempts', n, 'worker', A.worker, 'pid', A.pid,
             'started_at', now_s, 'run_deadline', string.format('%.6f', run_deadline), 'fingerprint', A.fingerprint)
  deadline_at(m, lease_deadline)
  -- Only a slot sent to one worker's own queue is in zkq:routed (resend_slot keeps routed_to).
  if routed and routed ~= '' then redis.call('ZREM', K.routed, m) end
  event({event = 'started', slot = s, attempt = n, worker = A.worker, pid = A.pid, token = token, batch = slot})
end

start(slot, A.token, attempts + 1, st, lf[6])
local out = {'ok', now_s, tostring(attempts + 1), slot, tostring(A.token), tostring(attempts + 1)}
local n = tonumber(j[2] or '0')
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
    start(s, tostring(f[2]), spent + 1, 'queued', routed)
    for _, v in ipairs({s, tostring(f[2]), tostring(spent + 1)}) do table.insert(out, v) end
    taken = taken + 1
  end
end
local started = 0
for old, count in pairs(left) do
  redis.call('HINCRBY', K.job, 'c:prove:' .. old, -count)
  started = started + count
end
if started > 0 then redis.call('HINCRBY', K.job, 'c:prove:running', started) end
redis.call('HINCRBY', K.job, 'attempts', taken)
if js == 'queued' then redis.call('HSET', K.job, 'state', 'running', 'started_at', now_s) end
progress_notice('started', j[3])
return out
