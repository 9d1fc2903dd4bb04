-- claim.lua: a worker starts an attempt on a slot (any kind).
-- args: token worker pid fingerprint run_s
-- settings: lease_ttl_s max_attempts
-- keys: quarantine
-- The attempt is overdue at now + run_s: its lease is never extended past that, whatever
-- its refreshes say. fingerprint '' skips the quarantine check (computing a witness runs no
-- kernel of any build).
-- Returns {'ok', attempt, started_at, the slot's record (Scheduler.slot_record's fields), the
-- job's `taken` count after this claim (record.lua's `seen`)} or why not: job_over, stale,
-- done, busy, excluded, quarantined, gave_up (attempts spent: the partition failed, or the job
-- for finalize).
-- The job's fields this claim reads and writes (its counts among them), in one read.
local c = 'c:' .. kind .. ':'
local j = job_fields({'state', 'notified_at', 'attempts', 'taken', c .. 'sending', c .. 'queued', c .. 'running'})
local js = j.state
if not live(js) then return {'job_over', tostring(js)} end
-- The slot's fields in one read.
local f = redis.call('HMGET', K.slot, 'token', 'state', 'worker', 'excluded', 'attempts', 'routed_to',
                     'witness', 'witness_name', 'input', 'input_name', 'enqueued_at', 'invalid_builds', 'invalid_fps')
local refused = claim_refusal(f, {token = A.token, worker = A.worker, fingerprint = A.fingerprint},
                              K.quarantine, S.max_attempts)
if refused then return refused end
local st = tostring(f[2])
local attempts = tonumber(f[5] or '0') + 1
local run_deadline = now + A.run_s
local started = kind == 'synth' and 'synth_started' or 'started'
-- The job's changes in one write: its counts (as count_move would change them; a lapsed lease
-- taken over is `taken` from its holder), its attempts, its start, a progress notice.
local writes = st ~= 'running' and count_fields(j, kind, {[st] = -1, running = 1})
               or count_fields(j, kind, {}, 1)
append(writes, 'attempts', tonumber(j.attempts or '0') + 1)
if js == 'queued' then append(writes, 'state', 'running', 'started_at', now_s) end
write_job(writes, started, j.notified_at)
redis.call('HSET', K.slot, 'state', 'running', 'attempts', attempts, 'worker', A.worker, 'pid', A.pid,
           'started_at', now_s, 'run_deadline', string.format('%.6f', run_deadline), 'fingerprint', A.fingerprint)
deadline_at(member, math.min(now + S.lease_ttl_s, run_deadline))
-- Only a slot sent to one worker's own queue is in zkq:routed (resend_slot keeps routed_to).
if f[6] and f[6] ~= '' then redis.call('ZREM', K.routed, member) end
event({event = started, attempt = attempts, worker = A.worker, pid = A.pid, token = A.token})
-- The slot's record as Scheduler.slot_record reads it (files, enqueued_at, blamed builds,
-- excluded workers, blamed fingerprints): read here anyway, so the worker need not read it
-- again; then the job's `taken` count as this claim left it.
local out = {'ok', tostring(attempts), now_s}
for _, i in ipairs({7, 8, 9, 10, 11, 12, 13, 4}) do table.insert(out, tostring(f[i] or '')) end
table.insert(out, tostring(tonumber(j.taken or '0') + (st == 'running' and 1 or 0)))
return out
