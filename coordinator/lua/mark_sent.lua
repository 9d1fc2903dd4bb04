-- mark_sent.lua: the messages of `sent` ({slot, token} pairs of this job: a slot a resend,
-- requeue, re-route or finalize's election put in `sending`) are on their queues. Each slot
-- stays under a deadline (queued_check_s): when it passes, the reaper checks that the message
-- still exists. (A submit's slots are created queued: arm_checks.lua.)
-- args: sent
-- settings: queued_check_s
-- Returns how many slots it marked (a slot that moved on meanwhile is left as it is).
local marked, members = {}, {}
local check_due = now + S.queued_check_s
for _, pair in ipairs(A.sent) do
  local s, token = tostring(pair[1]), tostring(pair[2])
  local key = slot_key(s)
  local f = redis.call('HMGET', key, 'token', 'state')
  if tostring(f[1]) == token and f[2] == 'sending' then
    redis.call('HSET', key, 'state', 'queued')
    table.insert(members, member_of(s))
    local k = kind_of(s)
    marked[k] = (marked[k] or 0) + 1
  end
end
-- check_at for all of them: one ZADD and one ZREM.
zadd_all(K.checks, check_due, members)
zrem_all(K.deadlines, members)
local total = 0
for k, count in pairs(marked) do
  redis.call('HINCRBY', K.job, 'c:' .. k .. ':sending', -count)
  redis.call('HINCRBY', K.job, 'c:' .. k .. ':queued', count)
  total = total + count
end
return total
