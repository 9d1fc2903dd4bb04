-- fail_input.lua: the attempt found bad input (the same input fails the same way everywhere):
-- the partition fails now with the reason, and the others go on (the whole job fails only
-- when it is all-or-nothing, or when no partition is left to prove).
-- args: token worker reason
-- Returns {'failed'}, or {'stale'} when the attempt was not current or the job already over.
if not live(hget(K.job, 'state')) or not current(A.token, 'running', A.worker) then return {'stale'} end
event({event = 'input_error', attempt = tonumber(hget(K.slot, 'attempts') or '0'), worker = A.worker,
       reason = A.reason})
give_up(A.reason)
return done({'failed'})
