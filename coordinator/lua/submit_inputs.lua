-- submit_inputs.lua: creates a job whose witnesses are still to be computed: every partition
-- starts in `synth_sending` (synth_token 1) with its input (sha256) and the input's name; the
-- partition's own token stays 0 until its witness exists. Or finds the job of a request id
-- seen before.
-- KEYS[6] zkq:request:{request_id} (or a dummy)   KEYS[7] zkq:jobs
-- KEYS[8..] the partition slots, in index order
-- ARGV[8] request_id ('' = none)   ARGV[9] priority   ARGV[10] zkey sha256   ARGV[11] n
-- ARGV[12] send_grace_s   ARGV[13] wasm sha256   ARGV[14] the wasm's name (for messages)
-- ARGV[15..] per partition 2 values: input sha256, input name
-- Synthesis deadlines are the members "{job}|s{i}" of zkq:deadlines.
-- Returns {'created', job} or {'exists', the earlier job}.
local request_id, priority, zkey, n, send_grace_s, wasm, wasm_name =
  ARGV[8], ARGV[9], ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13], ARGV[14]
if request_id ~= '' then
  local existing = redis.call('GET', KEYS[6])
  if existing then return {'exists', existing} end
  redis.call('SET', KEYS[6], job_id)
end
redis.call('HSET', KEYS[1], 'state', 'queued', 'priority', priority, 'zkey', zkey, 'n', n,
           'created_at', now_s, 'request_id', request_id, 'wasm', wasm, 'wasm_name', wasm_name)
redis.call('HSET', KEYS[2], 'state', 'idle', 'token', 0, 'attempts', 0)
for i = 0, n - 1 do
  redis.call('HSET', KEYS[8 + i], 'state', 'synth_sending', 'token', 0, 'attempts', 0,
             'synth_token', 1, 'synth_attempts', 0, 'input', ARGV[15 + 2 * i], 'input_name', ARGV[16 + 2 * i],
             'enqueued_at', now_s, 'routed_to', '')
  redis.call('ZADD', KEYS[3], now + send_grace_s, job_id .. sep .. 's' .. i)
end
redis.call('ZADD', KEYS[7], now, job_id)
return {'created', job_id}
