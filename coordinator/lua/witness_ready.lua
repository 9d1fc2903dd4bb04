-- witness_ready.lua: the hand-off from a witness slot ("s{i}") to its partition: the witness
-- is computed and stored, so the witness slot is done and partition i goes to `sending`
-- (token + 1) at once, proved while later witnesses are still being computed. The caller
-- sends the prove message.
-- args: token worker witness synth_s
-- Returns {'send', partition token}, {'stale'} or {'job_over'}.
if not live(hget(K.job, 'state')) then return {'job_over'} end
if not current(A.token, 'running', A.worker) then return {'stale'} end
local partition = index_of(slot)
move(slot, 'done')
redis.call('HSET', K.slot, 'witness', A.witness, 'finished_at', now_s,
           'synth_s', string.format('%.6f', A.synth_s))
no_deadline(member)
redis.call('HSET', slot_key(partition), 'witness', A.witness)
event({event = 'synthesized', attempt = tonumber(hget(K.slot, 'attempts') or '0'), worker = A.worker,
       synth_s = A.synth_s})
local tok = resend_slot(partition, '')
redis.call('PUBLISH', channel, 'synthesized')
return {'send', tostring(tok)}
