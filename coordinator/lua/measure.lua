-- measure.lua: folds one attempt's proving (and key loading) time into the moving averages
-- of its key on its kind of device, which set how long later attempts may run.
-- args: field prove_s key_load_s
-- keys: runtime
-- field: "{zkey sha256}|{device class}"; key_load_s 0: the key was loaded already.
-- Returns 1.
local function fold(f, seconds)
  local old = tonumber(hget(K.runtime, f) or '')
  redis.call('HSET', K.runtime, f, string.format('%.6f', old and (0.7 * old + 0.3 * seconds) or seconds))
end
fold(A.field, A.prove_s)
if A.key_load_s > 0 then fold(A.field .. '|load', A.key_load_s) end
return 1
