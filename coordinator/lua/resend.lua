-- resend.lua: a queued slot's message is missing (gone from the broker), or was taken by a
-- consumer that died before claiming it (kombu would restore it only after the visibility
-- timeout): back to `sending` with the SAME token (a duplicate is harmless: its claim finds
-- the slot taken); the caller sends it again.
-- args: token tag
-- keys: unacked unacked_index
-- tag: kombu's delivery tag of the orphaned unacknowledged copy to drop ('' = none: the
-- message is lost).
-- Returns {'resend', route} or {'skip'}.
if not live(hget(K.job, 'state')) or not current(A.token, 'queued') then return {'skip'} end
if A.tag ~= '' then
  if redis.call('HDEL', K.unacked, A.tag) == 0 then return {'skip'} end   -- acked or restored meanwhile
  redis.call('ZREM', K.unacked_index, A.tag)
end
move(slot, 'sending')
deadline_at(member, now + S.send_grace_s)
event({event = 'resent', reason = A.tag ~= '' and 'its message was taken by a worker that died before starting it'
                                    or 'its message was not on any queue'})
return {'resend', tostring(hget(K.slot, 'routed_to') or '')}
