-- cancel.lua: cancels a job that is not over (running attempts learn it at their next lease
-- refresh and stop).
-- args:
-- Returns 1, or 0 when it was already over.
if not live(hget(K.job, 'state')) then return 0 end
event({event = 'cancelled'})
end_job('cancelled')
return 1
