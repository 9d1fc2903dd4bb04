-- prelude.lua: put in front of every script by transitions.py (so line numbers in Redis's error
-- messages are offset by this file's length).
--
-- Every script is called the same way:
--   KEYS[1] zkq:job:{job}   KEYS[2] zkq:job:{job}:slot:{slot}   KEYS[3] zkq:deadlines
--   KEYS[4] zkq:job:{job}:events   KEYS[5] zkq:routed   KEYS[6] zkq:checks
--   KEYS[7..] the shared keys its header names on its "keys:" line, in that order: K.<name>
--   ARGV[1] JSON context: job, slot, prefix, sep, keys (those names) and settings: the fleet
--           settings its "settings:" line names, and result_ttl_s (S.<name>)
--   ARGV[2] JSON object of its own arguments: exactly the names on its "args:" line (A.<name>)
-- tests/test_lua_scripts.py checks each header against its script's body and its callers.
--
-- A job's slots, all with the same fields and the same states:
--   "0".."n-1"      prove partition i
--   "s0".."s{n-1}"  compute partition i's witness (jobs submitted as circuit inputs)
--   "finalize"      verify every proof, then release the result
--   idle -> sending -> queued -> running -> proved (a partition) | done (a witness) |
--   verified (finalize; a partition still proved in a done job reads as verified) | failed
--   (a submit creates its slots queued: submit.lua)
--   parked: no eligible worker is alive for it; no message anywhere (reroute.lua, park.lua)
-- A partition of an inputs job is idle until its witness exists (witness_ready.lua).
-- N witnesses are N independent proofs: a partition that fails ends alone (fail_partition),
-- and the job finalizes the others, unless it was submitted all-or-nothing.
--
-- Time is Redis's (TIME), never a caller's: workers' clocks may disagree.
local C = cjson.decode(ARGV[1])
local A = cjson.decode(ARGV[2])
local S = C.settings
local K = {job = KEYS[1], slot = KEYS[2], deadlines = KEYS[3], events = KEYS[4], routed = KEYS[5],
           checks = KEYS[6]}
for i, name in ipairs(C.keys) do K[name] = KEYS[6 + i] end
local job_id, slot, sep = C.job, C.slot, C.sep
local job_prefix = C.prefix .. ':job:' .. job_id
local channel = job_prefix .. ':notify'
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local now_s = string.format('%.6f', now)

local function hget(key, field) return redis.call('HGET', key, field) end
local function slot_key(s) return job_prefix .. ':slot:' .. s end
local function member_of(s) return job_id .. sep .. s end
local member = member_of(slot)

-- A live slot has one next deadline, in one of two sets: `deadlines` (a message being sent,
-- a lease, a parked slot) or `checks` (is a queued message still on its queue?). The reaper
-- serves `deadlines` first, so that however many partitions are queued, an expired lease
-- never waits behind their checks.
local function deadline_at(m, t)
  redis.call('ZADD', K.deadlines, t, m)
  redis.call('ZREM', K.checks, m)
end
local function check_at(m, t)
  redis.call('ZADD', K.checks, t, m)
  redis.call('ZREM', K.deadlines, m)
end
local function no_deadline(m)
  redis.call('ZREM', K.deadlines, m)
  redis.call('ZREM', K.checks, m)
end

-- 'prove' ("3"), 'synth' ("s3": partition 3's witness) or 'finalize'.
local function kind_of(s)
  if s == 'finalize' then return 'finalize' end
  if string.sub(s, 1, 1) == 's' then return 'synth' end
  return 'prove'
end
local kind = kind_of(slot)
-- The partition a slot serves ("s3" -> "3"), or 'finalize'.
local function index_of(s)
  if kind_of(s) == 'synth' then return string.sub(s, 2) end
  return s
end
local function label(s)
  s = s or slot
  if s == 'finalize' then return 'finalize' end
  return 'partition ' .. index_of(s)
end
-- How a message about a slot begins: "partition 3:", "partition 3: synthesis of in3.json", "finalize:".
local function subject(s)
  s = s or slot
  if kind_of(s) == 'synth' then
    return label(s) .. ': synthesis of ' .. tostring(hget(slot_key(s), 'input_name'))
  end
  return label(s) .. ':'
end

local function live(js) return js == 'queued' or js == 'running' end
local function contains(list, item)
  return string.find(' ' .. (list or '') .. ' ', ' ' .. item .. ' ', 1, true) ~= nil
end
-- Fencing: true when the slot is under `token`, in one of `states` (space separated) and, when
-- `worker` is given, held by it. Every transition of an attempt checks this first.
local function current(token, states, worker)
  local f = redis.call('HMGET', K.slot, 'token', 'state', 'worker')      -- one read, not three
  if tostring(f[1]) ~= tostring(token) then return false end
  if not contains(states, tostring(f[2])) then return false end
  return worker == nil or f[3] == worker
end
-- Moves slot `s` to `state`, keeping the job's count of its slots per kind and state
-- ("c:prove:running" ...), so that watching a job costs one read whatever its size.
-- Every change of a slot's state goes through here, or through count_fields below.
-- `old`, when the caller read it already, saves reading it again (false: the slot has none).
local function count_move(s, old, state)
  local prefix = 'c:' .. kind_of(s) .. ':'
  if old then redis.call('HINCRBY', K.job, prefix .. old, -1) end
  -- A running slot that ends other than by its holder's proof (record: running -> proved, fenced
  -- by the holder's token) may be in a batch lease someone still refreshes: refresh_batch.lua
  -- fences every member again once the job's `taken` count moves. A proved slot that moves on
  -- (reprove.lua drops its proof) counts too: its producer's late record fences by `taken` alone
  -- (record.lua's `seen`), and must then read the slot.
  if (old == 'running' and state ~= 'proved') or old == 'proved' then redis.call('HINCRBY', K.job, 'taken', 1) end
  redis.call('HINCRBY', K.job, prefix .. state, 1)
end
-- Whether nothing was taken from its holder since a caller saw the job's `taken` count `seen`
-- ('' = never saw it): `taken` is the job's count now, as read. Every running slot that leaves
-- its holder other than by its own record moves it (count_move, a claim of a lapsed lease), so
-- while it has not moved, what the caller holds is still its own (refresh_batch.lua, record.lua).
local function untaken_since(seen, taken)
  return seen ~= '' and seen == tostring(tonumber(taken or '0'))
end
-- The job's fields `names` as a table by name, from one HMGET (what count_fields reads).
local function job_fields(names)
  local values = redis.call('HMGET', K.job, unpack(names))
  local out = {}
  for i, name in ipairs(names) do out[name] = values[i] end
  return out
end
-- count_move's writes for transitions that change many of the job's fields at once (claims,
-- records): `counts` holds the count fields the caller read with job_fields, and `moves` the
-- slots entering each state ({state = n, ...}, negative to leave); returns the field/value
-- pairs for the job's one HSET (write_job) rather than an HINCRBY per field. `taken` as
-- count_move bumps it: slots taken from their holder other than by its proof.
local function count_fields(counts, kind_name, moves, taken)
  local out = {}
  for state, delta in pairs(moves) do
    if delta ~= 0 then
      local field = 'c:' .. kind_name .. ':' .. state
      table.insert(out, field)
      table.insert(out, tonumber(counts[field] or '0') + delta)
    end
  end
  if taken and taken > 0 then
    table.insert(out, 'taken')
    table.insert(out, tonumber(counts.taken or '0') + taken)
  end
  return out
end
local function move(s, state, old)
  local key = slot_key(s)
  if old == nil then old = hget(key, 'state') end
  if old == state then return end
  count_move(s, old, state)
  redis.call('HSET', key, 'state', state)
end
-- Adds `item` to the space-separated list in hash field `field` of `key` (once).
local function add_word(key, field, item)
  local list = hget(key, field)
  if not contains(list, item) then
    redis.call('HSET', key, field, (((list or '') .. ' ' .. item):gsub('^ ', '')))
  end
end
local function words(list)
  local out = {}
  for w in string.gmatch(list or '', '%S+') do table.insert(out, w) end
  return out
end
-- Progress notices ('started', 'proved') wake every client waiting on the job (Job.wait, the
-- API's event stream), which then reads the job's record: at most one per NOTICE_EVERY_S per
-- job, whatever the rate of claims and records (a waiter also reads the record every second
-- on its own, so a notice left out delays its view by less than that). The end of a job, a
-- failed partition, a requeue, a parked slot are always published. `notified_at`: the job's
-- field, as the caller read it.
local NOTICE_EVERY_S = 0.1
-- Whether a notice is due; a caller that writes `notified_at` in its own HSET of the job
-- publishes the notice itself.
local function notice_due(notified_at) return now - tonumber(notified_at or '0') >= NOTICE_EVERY_S end
local function progress_notice(what, notified_at)
  if notice_due(notified_at) then
    redis.call('HSET', K.job, 'notified_at', now_s)
    redis.call('PUBLISH', channel, what)
  end
end
-- Appends the values after `t` to the list `t`.
local function append(t, ...)
  for _, v in ipairs({...}) do table.insert(t, v) end
end
-- Writes the job's changed fields `writes` (field/value pairs) in one HSET, with the progress
-- notice `what` when one is due (`notified_at`: as the caller read it).
local function write_job(writes, what, notified_at)
  local notify = notice_due(notified_at)
  if notify then append(writes, 'notified_at', now_s) end
  redis.call('HSET', K.job, unpack(writes))
  if notify then redis.call('PUBLISH', channel, what) end
end
local function event_json(fields)
  if fields.slot == nil then fields.slot = index_of(slot) end
  fields.at = now
  return cjson.encode(fields)
end
local function event(fields)
  redis.call('RPUSH', K.events, event_json(fields))
end
-- Many slots' events (event_json's) in one RPUSH, and many members added to a sorted set in
-- one ZADD: a batch's transition costs a few commands more than one slot's, not B times as
-- many.
local function push_events(encoded)
  for i = 1, #encoded, 1000 do
    redis.call('RPUSH', K.events, unpack(encoded, i, math.min(i + 999, #encoded)))
  end
end
-- `flags` (optional): ZADD's own, e.g. {'XX', 'CH'}; returns the sum of ZADD's replies.
local function zadd_all(key, score, members, flags)
  local total = 0
  for i = 1, #members, 500 do
    local args = {unpack(flags or {})}
    for k = i, math.min(i + 499, #members) do
      table.insert(args, score)
      table.insert(args, members[k])
    end
    total = total + redis.call('ZADD', key, unpack(args))
  end
  return total
end
-- Notes that `build` proves `zkey` validly (suspect.lua weighs it): once per job and build
-- (`marked`: the job's valid_builds field, as the caller read it), not once per proof.
local function mark_valid(zkey, build, marked)
  if contains(marked, build) then return end
  local valid_key = C.prefix .. ':valid:' .. tostring(zkey)
  redis.call('HSET', valid_key, build, now_s)
  redis.call('EXPIRE', valid_key, math.max(1, math.floor(S.result_ttl_s)))
  local list = marked or ''
  if list ~= '' then list = list .. ' ' end
  redis.call('HSET', K.job, 'valid_builds', list .. build)
end
-- The moving average of `field` in the runtime hash `key`, which sets how long later attempts
-- of this key on this kind of device may run.
local function fold_runtime(key, field, seconds)
  local old = tonumber(hget(key, field) or '')
  redis.call('HSET', key, field, string.format('%.6f', old and (0.7 * old + 0.3 * seconds) or seconds))
end
-- Calls fn(slot) for every slot of the job: each partition, each witness, finalize.
-- A job submitted with witnesses (submit.lua's `inputs` '0') has no witness slots.
local function each_slot(fn)
  local f = redis.call('HMGET', K.job, 'n', 'inputs')
  local synth = f[2] ~= '0'
  for i = 0, tonumber(f[1] or '0') - 1 do
    fn(tostring(i))
    if synth then fn('s' .. i) end
  end
  fn('finalize')
end
-- ZREM of many members in few calls (Lua's unpack takes a few thousand values at most).
local function zrem_all(key, members)
  for i = 1, #members, 1000 do
    redis.call('ZREM', key, unpack(members, i, math.min(i + 999, #members)))
  end
end
local function drop_members()
  local members = {}
  each_slot(function(s) table.insert(members, member_of(s)) end)
  for _, key in ipairs({K.deadlines, K.checks, K.routed}) do zrem_all(key, members) end
end
-- An ended job's keys live on for result_ttl_s.
local function expire_job()
  local ttl = math.max(1, math.floor(S.result_ttl_s))
  for _, suffix in ipairs({'', ':results', ':events', ':bad', ':checked', ':unchecked'}) do
    redis.call('EXPIRE', job_prefix .. suffix, ttl)
  end
  each_slot(function(s) redis.call('EXPIRE', slot_key(s), ttl) end)
  local req = hget(K.job, 'request_id')
  if req and req ~= '' then redis.call('EXPIRE', C.prefix .. ':request:' .. req, ttl) end
end
local function end_job(state)
  redis.call('HSET', K.job, 'state', state, 'finished_at', now_s)
  drop_members()
  expire_job()
  redis.call('PUBLISH', channel, state)
end
-- Fails the job with `reason`, blaming the partition slot `s` serves (default: this one).
local function fail_job(reason, s)
  redis.call('HSET', K.job, 'error', reason, 'error_slot', index_of(s or slot))
  end_job('failed')
end
-- Puts slot `s` back in `sending` with a new token; the caller sends the message (to the
-- worker `route`'s own queue, or the shared queue when '').
local function resend_slot(s, route)
  local key, m = slot_key(s), member_of(s)
  local newtok = redis.call('HINCRBY', key, 'token', 1)
  move(s, 'sending')
  redis.call('HSET', key, 'routed_to', route, 'enqueued_at', now_s)
  redis.call('HDEL', key, 'affinity')   -- reroute.lua sets it again for a hand-on by key affinity
  deadline_at(m, now + S.send_grace_s)
  if route ~= '' then redis.call('ZADD', K.routed, now, m) else redis.call('ZREM', K.routed, m) end
  return newtok
end

-- The partition (or witness) slot `s` cannot be proved: it fails alone with `reason`, unless
-- the job is all-or-nothing (then the job fails). Either way the job may now be settled.
local elected = nil
local function settle() end   -- defined below; fail_partition calls it
local function fail_partition(reason, s)
  s = s or slot
  local p = index_of(s)
  for _, each in ipairs({p, 's' .. p}) do
    no_deadline(member_of(each))
    redis.call('ZREM', K.routed, member_of(each))
  end
  if redis.call('HGET', slot_key(p), 'state') ~= 'failed' then redis.call('HINCRBY', K.job, 'failed', 1) end
  move(p, 'failed')
  redis.call('HSET', slot_key(p), 'finished_at', now_s, 'error', reason)
  if s ~= p then
    move(s, 'failed')
    redis.call('HSET', slot_key(s), 'finished_at', now_s)
  end
  if hget(K.job, 'all_or_nothing') == '1' then
    fail_job(reason, s)
    return
  end
  redis.call('PUBLISH', channel, 'partition_failed')
  settle()
end
-- Every partition has ended (proved or failed): elect the finalize step (HSETNX
-- finalize_sent) when some were proved, or fail the job when none was. The elected token is
-- handed back through done().
-- `n`, `failed` and `proved` (the partitions holding a result: c:prove:proved while the job is
-- live): the job's figures, when the caller knows them already in this script.
settle = function(n, failed, proved)
  local f = {n, failed}
  if n == nil then f = redis.call('HMGET', K.job, 'n', 'failed') end
  local n = tonumber(f[1])
  proved = proved or redis.call('HLEN', job_prefix .. ':results')
  local failed = tonumber(f[2] or '0')
  if proved + failed < n then return end
  if proved == 0 then
    local reasons = {}
    for i = 0, math.min(n, 5) - 1 do table.insert(reasons, tostring(hget(slot_key(i), 'error'))) end
    local more = n > 5 and ('; and ' .. (n - 5) .. ' more') or ''
    fail_job(n == 1 and reasons[1] or ('every partition failed: ' .. table.concat(reasons, '; ') .. more),
             n == 1 and '0' or '')
    return
  end
  if redis.call('HSETNX', K.job, 'finalize_sent', '1') == 1 then
    -- A fresh election: the finalize step starts over with its own attempt count.
    redis.call('HSET', slot_key('finalize'), 'attempts', 0, 'excluded', '', 'bounces', 0)
    elected = tostring(resend_slot('finalize', ''))
  end
end
-- What recording `added` proofs does besides storing them (record.lua, record_batch.lua): the
-- progress notice, the build marked valid for this key, the attempt's timings folded into the
-- runtime averages (`runtime` key; field '' = measure nothing), and the job settled. `j`: the
-- recorder's job_fields(RECORDER_READS), before this record.
local function after_recording(j, added, runtime, build, field, prove_s, key_load_s)
  -- The counts (running -> proved) and the notice in the job's one write.
  write_job(count_fields(j, 'prove', {running = -added, proved = added}), 'proved', j.notified_at)
  mark_valid(j.zkey, build, j.valid_builds)
  if field ~= '' then
    fold_runtime(runtime, field, prove_s)
    if key_load_s > 0 then fold_runtime(runtime, field .. '|load', key_load_s) end
  end
  settle(j.n, j.failed, tonumber(j['c:prove:proved'] or '0') + added)
end
-- A result's JSON object (as its worker sent it) with Redis's time of its record added,
-- "recorded_at": the client's result() reads it there rather than the partition's slot.
local function stamped(payload)
  local body = string.sub(payload, 1, -2)          -- without its closing brace
  if string.match(body, '^%s*{%s*$') then return body .. '"recorded_at":' .. now_s .. '}' end
  return body .. ',"recorded_at":' .. now_s .. '}'
end
-- The job's fields record.lua and record_batch.lua read (after_recording's `j`).
-- `taken`: the fence of a recorder that gives its claim's (record.lua's `seen`).
local RECORDER_READS = {'state', 'zkey', 'notified_at', 'valid_builds', 'n', 'failed', 'c:prove:proved', 'c:prove:running',
                        'taken'}

-- A script's reply, with the finalize token it elected (if any) last, as "finalize=<token>":
-- the caller (coordinator/scheduler.py) sends that message.
local function done(reply)
  if elected then table.insert(reply, 'finalize=' .. elected) end
  return reply
end
-- Ends this slot's attempts for good: the job fails for the finalize step, the partition
-- alone for a partition or its witness.
local function give_up(reason)
  if kind == 'finalize' then fail_job(reason) else fail_partition(reason) end
end
-- The file a partition's witness came from, for messages: "witness_2.wtns" or "input 2.json".
local function source_of(p)
  local name = hget(slot_key(p), 'witness_name')
  if name and name ~= '' then return name end
  return tostring(hget(slot_key('s' .. p), 'input_name'))
end

-- Independent checks as proofs are recorded, so that finalize verifies only what no other
-- worker has. `checked`: {index, token} pairs of other workers' proofs this worker verified
-- valid (finalize trusts a mark only while its token is the partition's current one);
-- `fresh`: "index|token|worker|witness" entries of the proofs just recorded; `take`: how many
-- entries of other workers' proofs to hand this worker to verify. Returns them as
-- index, token, witness, result JSON, ... (a proof is never handed to its own producer: those
-- go back to the list).
local function exchange_checks(checked, fresh, take, worker)
  local list = job_prefix .. ':unchecked'
  if #checked > 0 then
    local marks = {}
    for _, pair in ipairs(checked) do
      table.insert(marks, tostring(pair[1]))
      table.insert(marks, tostring(pair[2]))
    end
    redis.call('HSET', job_prefix .. ':checked', unpack(marks))
  end
  local out = {}
  local got = take > 0 and redis.call('LPOP', list, take) or false
  if got then
    local own, fields, items = {}, {}, {}
    for _, entry in ipairs(got) do
      local i, token, producer, witness = string.match(entry, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
      if producer == worker then
        table.insert(own, entry)
      else
        table.insert(items, {i, token, witness})
        table.insert(fields, i)
      end
    end
    if #own > 0 then redis.call('RPUSH', list, unpack(own)) end
    if #fields > 0 then
      local payloads = redis.call('HMGET', job_prefix .. ':results', unpack(fields))
      for k, item in ipairs(items) do
        if payloads[k] then      -- a result dropped meanwhile (re-proved) is finalize's to check
          for _, v in ipairs({item[1], item[2], item[3], payloads[k]}) do table.insert(out, v) end
        end
      end
    end
  end
  if #fresh > 0 then redis.call('RPUSH', list, unpack(fresh)) end
  return out
end

-- Why this worker may not start an attempt on this slot, as claim.lua replies (stale, busy,
-- done, quarantined, excluded, or gave_up: its attempts are spent, which fails it here), or nil
-- when it may. `f`: the slot's HMGET of token, state, worker, excluded, attempts; `who`: the
-- claim's token, worker and fingerprint; the quarantine's key and the attempts cap: all from the
-- caller's own header. Shared by claim.lua and claim_batch.lua (its lead), so both judge alike.
local function claim_refusal(f, who, quarantine, max_attempts)
  if tostring(f[1]) ~= tostring(who.token) then return {'stale', tostring(f[1])} end
  local st = tostring(f[2])
  if st == 'running' then
    if tonumber(redis.call('ZSCORE', K.deadlines, member) or '0') > now then
      return {'busy', tostring(f[3])}
    end
  elseif st ~= 'sending' and st ~= 'queued' then
    return {'done', st}
  end
  if who.fingerprint ~= '' and redis.call('HEXISTS', quarantine, who.fingerprint) == 1 then
    return {'quarantined', who.fingerprint}
  end
  if contains(f[4], who.worker) then return {'excluded', f[4]} end
  local attempts = tonumber(f[5] or '0')
  if attempts >= max_attempts then
    event({event = 'gave_up', attempt = attempts})
    give_up(subject() .. ' gave up after ' .. attempts .. ' attempts (last on worker ' .. tostring(f[3]) .. ')')
    return done({'gave_up'})
  end
  return nil
end
