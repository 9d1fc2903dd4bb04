-- recheck.lua: the reaper found the checks of these slots due (members of zkq:checks, of any
-- job): in one call, re-arms the check of each slot still `queued` and hands it back for the
-- reaper to look for its message; any other slot is left for reap.lua, one by one.
-- args: members
-- settings: queued_check_s
-- members: "{job}|{slot}" strings. A queued slot costs one read here (and its job's state,
-- once per job), instead of a transition of its own: at tens of thousands of queued
-- partitions the checks are most of the reaper's traffic.
-- Returns {count, job, slot, token, route, ... (count checks), member, ... (the others)}.
local checks, others, rearm = {}, {}, {}
local live_job = {}
for _, m in ipairs(A.members) do
  local at = string.find(m, sep, 1, true)
  local queued = nil
  if at then
    local j, s = string.sub(m, 1, at - 1), string.sub(m, at + 1)
    local jkey = C.prefix .. ':job:' .. j
    if live_job[j] == nil then live_job[j] = live(redis.call('HGET', jkey, 'state')) end
    if live_job[j] then
      local f = redis.call('HMGET', jkey .. ':slot:' .. s, 'state', 'token', 'routed_to')
      if f[1] == 'queued' then queued = {j, s, tostring(f[2]), tostring(f[3] or '')} end
    end
  end
  if queued then
    for _, v in ipairs(queued) do table.insert(checks, v) end
    table.insert(rearm, now + S.queued_check_s)
    table.insert(rearm, m)
  else
    table.insert(others, m)
  end
end
for i = 1, #rearm, 1000 do
  redis.call('ZADD', K.checks, unpack(rearm, i, math.min(i + 999, #rearm)))
end
local out = {tostring(#checks / 4)}
for _, v in ipairs(checks) do table.insert(out, v) end
for _, v in ipairs(others) do table.insert(out, v) end
return out
