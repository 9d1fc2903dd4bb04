-- synth_mark_sent.lua: the synthesis message of (slot, synth token) is on a queue; from now on
-- its deadline is the queued check (the reaper verifies the message still exists).
-- ARGV[8] synth token   ARGV[9] queued_check_s
-- Returns 1, or 0 when the slot moved on meanwhile.
local token, queued_check_s = ARGV[8], tonumber(ARGV[9])
if redis.call('HGET', KEYS[2], 'synth_token') == token and redis.call('HGET', KEYS[2], 'state') == 'synth_sending' then
  redis.call('HSET', KEYS[2], 'state', 'synth_queued')
  redis.call('ZADD', KEYS[3], now + queued_check_s, job_id .. sep .. 's' .. slot)
  return 1
end
return 0
