-- mark_sent.lua: the message of (slot, token) is on a queue. The slot stays under a deadline
-- (queued_check_s): when it passes, the reaper checks that the message still exists.
-- args: token
-- settings: queued_check_s
-- Returns 1, or 0 when the slot moved on meanwhile.
if not current(A.token, 'sending') then return 0 end
move(slot, 'queued')
check_at(member, now + S.queued_check_s)
return 1
