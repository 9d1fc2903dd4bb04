-- refresh_batch.lua: refresh.lua for every member of a batch a worker holds, in one call: one
-- lease refresh per worker and batch rather than one per partition. Each member keeps its own
-- lease (its deadline in zkq:deadlines), extended but never past its run deadline, exactly as
-- refresh.lua extends it.
-- args: members worker seen run_until
-- settings: lease_ttl_s
-- members: {index, token} pairs of the job (the slot the caller names is the batch's lead).
-- seen, run_until: what the caller's last full check returned ('' before the first).
--
-- Fencing each member by its token costs one read per member; a batch of 16 refreshed every
-- lease_ttl_s / 4 made those reads most of a batched partition's commands. A running slot
-- leaves its holder only through count_move (or a claim of a lapsed lease), and each such
-- change bumps the job's `taken` count, except the holder's own record (fenced by its token).
-- So while `taken` is what the caller's last full check saw, no member was taken from it
-- since: the leases are extended without reading a slot (ZADD XX: a member its holder has
-- just recorded, gone from zkq:deadlines, is not put back). Otherwise, or past the run deadline,
-- every member is fenced by its own token again, as before.
-- Returns {'job_over'}, or {taken, run_until, verdict...}: one verdict per member, in order:
-- 'ok', 'overdue' (past its run deadline: the reaper takes it) or 'lost' (someone else
-- holds it now).
local j = redis.call('HMGET', K.job, 'state', 'taken')
if not live(j[1]) then return {'job_over'} end
local taken = tostring(tonumber(j[2] or '0'))
local out = {taken, A.run_until}
local run_until = tonumber(A.run_until)
if untaken_since(A.seen, taken) and run_until and now < run_until then
  local t = string.format('%.6f', math.min(now + S.lease_ttl_s, run_until))
  local args = {}
  for _, pair in ipairs(A.members) do
    table.insert(args, t)
    table.insert(args, member_of(tostring(pair[1])))
    table.insert(out, 'ok')
  end
  redis.call('ZADD', K.deadlines, 'XX', unpack(args))
  return out
end
-- New lease deadlines, grouped (a batch's members share their run deadline): one ZADD each.
local by_deadline = {}
local earliest = nil
for _, pair in ipairs(A.members) do
  local s, token = tostring(pair[1]), tostring(pair[2])
  local f = redis.call('HMGET', slot_key(s), 'token', 'state', 'worker', 'run_deadline')
  local verdict = 'lost'
  if tostring(f[1]) == token and f[2] == 'running' and f[3] == A.worker then
    local run_deadline = tonumber(f[4] or '0')
    if now >= run_deadline then
      verdict = 'overdue'
    else
      -- A running slot's one deadline is its lease, in zkq:deadlines (claim took it off zkq:checks).
      local t = string.format('%.6f', math.min(now + S.lease_ttl_s, run_deadline))
      by_deadline[t] = by_deadline[t] or {}
      table.insert(by_deadline[t], member_of(s))
      if not earliest or run_deadline < earliest then earliest = run_deadline end
      verdict = 'ok'
    end
  end
  table.insert(out, verdict)
end
for t, members in pairs(by_deadline) do zadd_all(K.deadlines, t, members) end
-- The next call may skip the reads while nothing is taken and the earliest run deadline of the
-- members still held is ahead.
out[2] = earliest and string.format('%.6f', earliest) or ''
return out
