-- arm_checks.lua: the messages a submit sent for `slots` (this job's slots submit.lua created
-- queued, first checked send_grace_s after it) are on their queues: each slot's next check is
-- due queued_check_s from now. A slot taken meanwhile has left zkq:checks (its lease is in
-- zkq:deadlines) and is left as it is (ZADD XX): no slot is read or written.
-- args: slots
-- settings: queued_check_s
-- Returns how many checks it moved.
local members = {}
for _, s in ipairs(A.slots) do table.insert(members, member_of(tostring(s))) end
return zadd_all(K.checks, now + S.queued_check_s, members, {'XX', 'CH'})
