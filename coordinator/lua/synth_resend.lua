-- synth_resend.lua: a queued synthesis message is missing (gone from the broker), or was taken
-- by a consumer that died before claiming it (kombu would restore it only after the visibility
-- timeout): put the slot back to `synth_sending` with the SAME synth token (a duplicate is
-- harmless: its claim finds the slot taken); the caller sends it again.
-- KEYS[6] kombu's unacked hash   KEYS[7] kombu's unacked index
-- ARGV[8] synth token   ARGV[9] send_grace_s
-- ARGV[10] delivery tag of the orphaned unacknowledged copy to drop ('' = none: the message is lost)
-- Returns {'resend'} or {'skip'}.
local token, send_grace_s, tag = ARGV[8], tonumber(ARGV[9]), ARGV[10]
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'skip'} end
if redis.call('HGET', KEYS[2], 'synth_token') ~= token or redis.call('HGET', KEYS[2], 'state') ~= 'synth_queued' then
  return {'skip'}
end
if tag ~= '' then
  if redis.call('HDEL', KEYS[6], tag) == 0 then return {'skip'} end   -- acked or restored meanwhile
  redis.call('ZREM', KEYS[7], tag)
end
redis.call('HSET', KEYS[2], 'state', 'synth_sending')
redis.call('ZADD', KEYS[3], now + send_grace_s, job_id .. sep .. 's' .. slot)
event({event = 'resent',
       reason = tag ~= '' and 'its synthesis message was taken by a worker that died before starting it'
                          or 'its synthesis message was not on any queue'})
return {'resend'}
