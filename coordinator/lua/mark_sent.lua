-- mark_sent.lua: the message of (slot, token) is on a queue. The slot stays under a deadline
-- (queued_check_s): when it passes, the reaper checks that the message still exists.
-- ARGV[8] token   ARGV[9] queued_check_s
-- Returns 1, or 0 when the slot moved on meanwhile.
local token, queued_check_s = ARGV[8], tonumber(ARGV[9])
if redis.call('HGET', KEYS[2], 'token') == token and redis.call('HGET', KEYS[2], 'state') == 'sending' then
  redis.call('HSET', KEYS[2], 'state', 'queued')
  redis.call('ZADD', KEYS[3], now + queued_check_s, member)
  return 1
end
return 0
