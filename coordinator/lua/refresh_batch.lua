-- refresh_batch.lua: refresh.lua for every member of a batch a worker holds, in one call: one
-- lease refresh per worker and batch rather than one per partition. Each member keeps its own
-- lease (its deadline in zkq:deadlines, by its own token), extended but never past its run
-- deadline, exactly as refresh.lua extends it.
-- args: members worker
-- settings: lease_ttl_s
-- members: {index, token} pairs of the job (the slot the caller names is the batch's lead).
-- Returns {'job_over'}, or one verdict per member, in order: 'ok', 'overdue' (past its run
-- deadline: the reaper takes it) or 'lost' (someone else holds it now).
if not live(hget(K.job, 'state')) then return {'job_over'} end
local out = {}
-- New lease deadlines, grouped (a batch's members share their run deadline): one ZADD each.
local by_deadline = {}
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
      verdict = 'ok'
    end
  end
  table.insert(out, verdict)
end
for t, members in pairs(by_deadline) do zadd_all(K.deadlines, t, members) end
return out
