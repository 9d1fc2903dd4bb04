-- claim_batch.lua: a worker starts attempts on up to max_batch partitions of one job (one
-- key) in one transition. Scan mode (count 0: the message named one partition): the partition
-- its message names (the lead, exactly as claim.lua claims it) and queued companions found
-- among the next `scan` partitions after it. Range mode (count > 0: a prove_batch message
-- stood for partitions slot .. slot + count - 1, all sent under `token`): every one of them
-- still waiting under that token.
-- args: token worker pid fingerprint run_s max_batch scan count
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
-- In range mode the message was each member's only one: a member under another token (sent
-- again alone) or taken meanwhile is skipped; one this worker may not take (excluded, routed
-- elsewhere, attempts spent) is left queued, and the reaper's check of its message (gone
-- with this one) sends it again alone.
-- Returns {'ok', started_at, lead_attempt, taken, run_deadline, i1, token1, attempt1, <i1's
-- record: 8 fields>, ...} (taken: the job's count of slots taken from their holder after this
-- claim, and the members' run deadline: what refresh_batch.lua's first call may start from)
-- (the record: Scheduler.slot_records's fields, in its order; the lead first in scan
-- mode), or why the lead cannot be claimed, as claim.lua: job_over, stale, done, busy,
-- excluded, quarantined, gave_up (then no companion is claimed either); in range mode
-- job_over, quarantined, or {'none'} when no member could be taken.
-- The job's fields this claim reads and writes (its counts among them), in one read.
local j = job_fields({'state', 'n', 'notified_at', 'attempts', 'taken', 'c:prove:sending', 'c:prove:queued',
                      'c:prove:running'})
local js = j.state
if not live(js) then return {'job_over', tostring(js)} end
if kind ~= 'prove' then return {'done', 'not a partition'} end

local run_deadline = now + A.run_s
local lease_deadline = math.min(now + S.lease_ttl_s, run_deadline)
-- How many members left each state (counted once for the whole batch, not member by member);
-- their deadline members, routed members and events, written once for all of them.
local left, started_members, routed_members, events = {}, {}, {}, {}
local taken_over = 0      -- lapsed leases taken over: slots `taken` from their holder
-- Starts attempt `n` of partition `s` (whose checks the caller made) under `token`; `old`: its
-- state, `routed`: its routed_to, as the caller read them.
local function start(s, token, n, old, routed)
  local m = member_of(s)
  if old ~= 'running' then left[old] = (left[old] or 0) + 1 else taken_over = taken_over + 1 end
  redis.call('HSET', slot_key(s), 'state', 'running', 'attempts', n, 'worker', A.worker, 'pid', A.pid,
             'started_at', now_s, 'run_deadline', string.format('%.6f', run_deadline), 'fingerprint', A.fingerprint)
  table.insert(started_members, m)
  -- Only a slot sent to one worker's own queue is in zkq:routed (resend_slot keeps routed_to).
  if routed and routed ~= '' then table.insert(routed_members, m) end
  table.insert(events, event_json({event = 'started', slot = s, attempt = n, worker = A.worker, pid = A.pid,
                                   token = token, batch = slot}))
end

-- Each member's record as Scheduler.slot_records reads it, read with its checks (so the worker
-- need not read it again): these fields, then 'excluded', which the checks read anyway.
local RECORD = {'witness', 'witness_name', 'input', 'input_name', 'enqueued_at', 'invalid_builds', 'invalid_fps'}
local function add_member(out, triple, f, first)
  for _, v in ipairs(triple) do table.insert(out, v) end
  for i = first, first + #RECORD - 1 do table.insert(out, tostring(f[i] or '')) end
  table.insert(out, tostring(f[4] or ''))
end
local out
local taken = 0
if A.count > 0 then
  if A.fingerprint ~= '' and redis.call('HEXISTS', K.quarantine, A.fingerprint) == 1 then
    return {'quarantined', A.fingerprint}
  end
  local first, n = tonumber(slot), tonumber(j.n or '0')
  out = {'ok', now_s, '0', '', ''}
  for i = first, math.min(first + A.count, n) - 1 do
    if taken >= A.max_batch then break end
    local s = tostring(i)
    local f = redis.call('HMGET', slot_key(s), 'state', 'token', 'routed_to', 'excluded', 'attempts', unpack(RECORD))
    local routed = f[3] or ''
    local spent = tonumber(f[5] or '0')
    if tostring(f[2]) == tostring(A.token) and (f[1] == 'queued' or f[1] == 'sending')
       and (routed == '' or routed == A.worker) and not contains(f[4], A.worker) and spent < S.max_attempts then
      start(s, tostring(f[2]), spent + 1, f[1], routed)
      add_member(out, {s, tostring(f[2]), tostring(spent + 1)}, f, 6)
      if taken == 0 then out[3] = tostring(spent + 1) end
      taken = taken + 1
    end
  end
  if taken == 0 then return {'none'} end
else
  -- The lead's fields in one read.
  local lf = redis.call('HMGET', K.slot, 'token', 'state', 'worker', 'excluded', 'attempts', 'routed_to', unpack(RECORD))
  local refused = claim_refusal(lf, {token = A.token, worker = A.worker, fingerprint = A.fingerprint},
                                K.quarantine, S.max_attempts)
  if refused then return refused end
  local attempts = tonumber(lf[5] or '0')
  start(slot, A.token, attempts + 1, tostring(lf[2]), lf[6])
  out = {'ok', now_s, tostring(attempts + 1), '', ''}
  add_member(out, {slot, tostring(A.token), tostring(attempts + 1)}, lf, 7)
  local n = tonumber(j.n or '0')
  local lead = tonumber(slot)
  taken = 1
  for step = 1, math.min(A.scan, n - 1) do
    if taken >= A.max_batch then break end
    local s = tostring((lead + step) % n)
    local f = redis.call('HMGET', slot_key(s), 'state', 'token', 'routed_to', 'excluded', 'attempts', unpack(RECORD))
    local routed = f[3] or ''
    local spent = tonumber(f[5] or '0')
    if f[1] == 'queued' and (routed == '' or routed == A.worker) and not contains(f[4], A.worker)
       and spent < S.max_attempts then
      start(s, tostring(f[2]), spent + 1, 'queued', routed)
      add_member(out, {s, tostring(f[2]), tostring(spent + 1)}, f, 6)
      taken = taken + 1
    end
  end
end
-- Each member's lease in zkq:deadlines, off zkq:checks and zkq:routed: one command each.
zadd_all(K.deadlines, lease_deadline, started_members)
zrem_all(K.checks, started_members)
if #routed_members > 0 then zrem_all(K.routed, routed_members) end
push_events(events)
-- The job's changes in one write: its counts (each member's old state -> running, as count_move
-- would change them), its attempts, its start, a progress notice.
local moves = {running = 0}
for old, count in pairs(left) do
  moves[old] = -count
  moves.running = moves.running + count
end
local writes = count_fields(j, 'prove', moves, taken_over)
append(writes, 'attempts', tonumber(j.attempts or '0') + taken)
if js == 'queued' then append(writes, 'state', 'running', 'started_at', now_s) end
write_job(writes, 'started', j.notified_at)
out[4] = tostring(tonumber(j.taken or '0') + taken_over)
out[5] = string.format('%.6f', run_deadline)
return out
