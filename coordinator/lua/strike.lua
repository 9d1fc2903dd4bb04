-- strike.lua: a partition was proved valid by `confirmed_by`, so every other fingerprint whose
-- proof of it failed was at fault: each gets a strike, and a fingerprint with quarantine_after
-- strikes is quarantined fleet-wide (its workers take no work until an operator clears it).
-- args: fingerprints confirmed_by
-- settings: quarantine_after
-- keys: strikes quarantine fingerprints
-- Returns the fingerprints quarantined now.
local out = {}
for _, fp in ipairs(A.fingerprints) do
  if fp ~= A.confirmed_by then
    local strikes = redis.call('HINCRBY', K.strikes, fp, 1)
    if strikes >= S.quarantine_after and redis.call('HEXISTS', K.quarantine, fp) == 0 then
      local info = cjson.decode(hget(K.fingerprints, fp) or '{}')
      redis.call('HSET', K.quarantine, fp, cjson.encode({fingerprint = info, strikes = strikes, at = now,
        reason = strikes .. ' invalid proofs, each of a witness another build proved valid (last: job ' ..
                 job_id .. ' ' .. label() .. ')'}))
      event({event = 'quarantined', fingerprint = fp, strikes = strikes})
      table.insert(out, fp)
    end
  end
end
return out
