-- resend.lua: the slot's message is missing (never confirmed sent, or gone from the broker):
-- send it again with the SAME token (a duplicate is harmless: its claim finds the slot taken).
-- KEYS[6] kombu's unacked hash   KEYS[7] kombu's unacked index
-- ARGV[8] token   ARGV[9] send_grace_s   ARGV[10] states it may be in (space separated)
-- ARGV[11] delivery tag of an orphaned unacknowledged copy to drop ('' = none): its
--   consumer died before claiming, and kombu would only restore it after the visibility timeout
-- Returns {'resend', route} or {'skip'}.
local token, send_grace_s, states, tag = ARGV[8], tonumber(ARGV[9]), ARGV[10], ARGV[11]
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'skip'} end
if redis.call('HGET', KEYS[2], 'token') ~= token or not contains(states, tostring(redis.call('HGET', KEYS[2], 'state'))) then
  return {'skip'}
end
if tag ~= '' then
  if redis.call('HDEL', KEYS[6], tag) == 0 then return {'skip'} end   -- acked or restored meanwhile
  redis.call('ZREM', KEYS[7], tag)
end
redis.call('HSET', KEYS[2], 'state', 'sending')
redis.call('ZADD', KEYS[3], now + send_grace_s, member)
event({event = 'resent', reason = tag ~= '' and 'its message was taken by a worker that died before starting it'
                                  or 'its message was not on any queue'})
return {'resend', tostring(redis.call('HGET', KEYS[2], 'routed_to') or '')}
