"""The fan-in barrier and every state transition of a job, as atomic Redis Lua scripts.

Celery's chord counter is not used: it double-counts a redelivered member and a member
killed without reject-on-worker-lost sinks the whole chord. Instead each slot (partition
or finalize) carries a `token` that is bumped whenever it is (re)enqueued; a message whose
token is not the slot's current one is stale and does nothing. A worker claims a slot
(attempts += 1, lease deadline in zkq:deadlines), refreshes its lease while proving, and
records the result with HSETNX, so a duplicate run changes nothing. The write that
completes the set elects itself with HSETNX finalize_sent and gets the finalize token.

Every transition that must be followed by sending a message leaves the slot in state
`sending` with a deadline: if the process dies before the message is out, the reaper
sends it again (a duplicate message with the same token is harmless: its claim sees the
slot running or done).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis

from . import keys
from .keys import FINALIZE_SLOT

_PRELUDE = r"""
local job_id, slot, now, channel, sep = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local member = job_id .. sep .. slot
local function label(s) if s == 'finalize' then return 'finalize' end return 'partition ' .. s end
local function live(js) return js == 'queued' or js == 'running' end
local function event(fields)
  if fields.slot == nil then fields.slot = slot end
  fields.at = now
  redis.call('RPUSH', KEYS[4], cjson.encode(fields))
end
local function drop_members()
  local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
  for i = 0, n - 1 do
    redis.call('ZREM', KEYS[3], job_id .. sep .. i)
    redis.call('ZREM', KEYS[5], job_id .. sep .. i)
  end
  redis.call('ZREM', KEYS[3], job_id .. sep .. 'finalize')
  redis.call('ZREM', KEYS[5], job_id .. sep .. 'finalize')
end
local function fail_job(reason, where)
  redis.call('HSET', KEYS[1], 'state', 'failed', 'error', reason, 'error_slot', where,
             'finished_at', ARGV[3])
  drop_members()
  redis.call('PUBLISH', channel, 'failed')
end
local function contains(list, item)
  return string.find(' ' .. (list or '') .. ' ', ' ' .. item .. ' ', 1, true) ~= nil
end
"""

# KEYS: job, slot, deadlines, events, routed
# ARGV: +token, worker, pid, lease_ttl_s, max_attempts
_CLAIM = _PRELUDE + r"""
local js = redis.call('HGET', KEYS[1], 'state')
if not live(js) then return {'job_over', tostring(js)} end
local tok = redis.call('HGET', KEYS[2], 'token')
if tok ~= ARGV[6] then return {'stale', tostring(tok)} end
local st = redis.call('HGET', KEYS[2], 'state')
if st == 'proved' or st == 'verified' or st == 'failed' then return {'done', st} end
if st == 'running' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[3], member) or '0')
  if dl > now then return {'busy', tostring(redis.call('HGET', KEYS[2], 'worker'))} end
end
local excluded = redis.call('HGET', KEYS[2], 'excluded')
if contains(excluded, ARGV[7]) then return {'excluded', excluded} end
local attempts = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0')
if attempts >= tonumber(ARGV[10]) then
  event({event = 'gave_up', attempt = attempts})
  fail_job(label(slot) .. ': gave up after ' .. attempts .. ' attempts (last on worker ' ..
           tostring(redis.call('HGET', KEYS[2], 'worker')) .. ')', slot)
  return {'job_over', 'failed'}
end
attempts = attempts + 1
redis.call('HSET', KEYS[2], 'state', 'running', 'attempts', attempts, 'worker', ARGV[7],
           'pid', ARGV[8], 'started_at', ARGV[3])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[9]), member)
redis.call('ZREM', KEYS[5], member)
if js == 'queued' then redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', ARGV[3]) end
event({event = 'started', attempt = attempts, worker = ARGV[7], pid = tonumber(ARGV[8]),
       token = tonumber(ARGV[6])})
redis.call('PUBLISH', channel, 'started')
return {'ok', tostring(attempts)}
"""

# ARGV: +token, worker, lease_ttl_s
_REFRESH = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then return 'job_over' end
if redis.call('HGET', KEYS[2], 'token') ~= ARGV[6] or redis.call('HGET', KEYS[2], 'state') ~= 'running'
   or redis.call('HGET', KEYS[2], 'worker') ~= ARGV[7] then return 'lost' end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[8]), member)
return 'ok'
"""

# KEYS: +results, finalize slot.  ARGV: +worker, payload, send_grace_s
_RECORD = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
if redis.call('HSETNX', KEYS[6], slot, ARGV[7]) == 0 then return {'duplicate'} end
redis.call('HSET', KEYS[2], 'state', 'proved', 'finished_at', ARGV[3], 'producer', ARGV[6])
redis.call('ZREM', KEYS[3], member)
redis.call('ZREM', KEYS[5], member)
event({event = 'proved', attempt = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0'),
       worker = ARGV[6]})
redis.call('PUBLISH', channel, 'proved')
local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
if redis.call('HLEN', KEYS[6]) >= n and redis.call('HSETNX', KEYS[1], 'finalize_sent', '1') == 1 then
  local ftok = redis.call('HINCRBY', KEYS[7], 'token', 1)
  redis.call('HSET', KEYS[7], 'state', 'sending', 'routed_to', '', 'enqueued_at', ARGV[3])
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[8]), job_id .. sep .. 'finalize')
  return {'finalize', tostring(ftok)}
end
return {'recorded'}
"""

# ARGV: +token
_MARK_SENT = _PRELUDE + r"""
if redis.call('HGET', KEYS[2], 'token') == ARGV[6] and redis.call('HGET', KEYS[2], 'state') == 'sending' then
  redis.call('HSET', KEYS[2], 'state', 'queued')
  redis.call('ZREM', KEYS[3], member)
  return 1
end
return 0
"""

# ARGV: +expect_token ('' = any), allowed states (space separated), require_expired (1/0),
#       event, reason, exclude_worker, route_to, max_attempts, send_grace_s,
#       counts_as_attempt (1/0), max_bounces
_REQUEUE = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
local tok = redis.call('HGET', KEYS[2], 'token')
if ARGV[6] ~= '' and tok ~= ARGV[6] then return {'stale'} end
local st = redis.call('HGET', KEYS[2], 'state')
if not contains(ARGV[7], tostring(st)) then return {'skip', tostring(st)} end
if ARGV[8] == '1' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[3], member) or '0')
  if dl > now then return {'skip', 'lease alive'} end
end
local attempts = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0')
local worker = tostring(redis.call('HGET', KEYS[2], 'worker'))
event({event = ARGV[9], attempt = attempts, worker = worker, reason = ARGV[10]})
if ARGV[15] == '1' then
  if attempts >= tonumber(ARGV[13]) then
    fail_job(label(slot) .. ': gave up after ' .. attempts .. ' attempts; last: ' .. ARGV[10], slot)
    return {'failed'}
  end
else
  local bounces = redis.call('HINCRBY', KEYS[2], 'bounces', 1)
  if bounces > tonumber(ARGV[16]) then
    fail_job(label(slot) .. ': ' .. ARGV[10], slot)
    return {'failed'}
  end
end
if ARGV[11] ~= '' then
  local excluded = redis.call('HGET', KEYS[2], 'excluded')
  if not contains(excluded, ARGV[11]) then
    redis.call('HSET', KEYS[2], 'excluded', (((excluded or '') .. ' ' .. ARGV[11]):gsub('^ ', '')))
  end
end
local newtok = redis.call('HINCRBY', KEYS[2], 'token', 1)
redis.call('HSET', KEYS[2], 'state', 'sending', 'routed_to', ARGV[12], 'enqueued_at', ARGV[3])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[14]), member)
if ARGV[12] ~= '' then redis.call('ZADD', KEYS[5], now, member) else redis.call('ZREM', KEYS[5], member) end
redis.call('PUBLISH', channel, 'requeued')
return {'send', tostring(newtok)}
"""

# ARGV: +token, send_grace_s
_RESEND = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then redis.call('ZREM', KEYS[3], member) return {'job_over'} end
if redis.call('HGET', KEYS[2], 'token') ~= ARGV[6] or redis.call('HGET', KEYS[2], 'state') ~= 'sending' then
  return {'skip'}
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[7]), member)
return {'resend', tostring(redis.call('HGET', KEYS[2], 'routed_to') or '')}
"""

# ARGV: +reason
_FAIL_INPUT = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then return 0 end
redis.call('HSET', KEYS[2], 'state', 'failed', 'finished_at', ARGV[3])
event({event = 'input_error', attempt = tonumber(redis.call('HGET', KEYS[2], 'attempts') or '0'),
       worker = tostring(redis.call('HGET', KEYS[2], 'worker')), reason = ARGV[6]})
fail_job(ARGV[6], slot)
return 1
"""

# KEYS: +results, finalize slot (again), bad, then the slot of each bad index.
# ARGV: +finalize token, max_attempts, send_grace_s, then per bad: index, worker, fingerprint, reason, route
_REPROVE = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then return {'job_over'} end
if redis.call('HGET', KEYS[7], 'token') ~= ARGV[6] or redis.call('HGET', KEYS[7], 'state') ~= 'running' then
  return {'stale'}
end
local out = {'send'}
local k = 0
for a = 9, #ARGV, 5 do
  k = k + 1
  local key, idx, worker, reason, route = KEYS[8 + k], ARGV[a], ARGV[a + 1], ARGV[a + 3], ARGV[a + 4]
  local m = job_id .. sep .. idx
  redis.call('RPUSH', KEYS[8], cjson.encode({index = tonumber(idx), worker = worker,
      fingerprint = cjson.decode(ARGV[a + 2]), reason = reason, at = now}))
  local attempts = tonumber(redis.call('HGET', key, 'attempts') or '0')
  event({slot = idx, event = 'invalid', attempt = attempts, worker = worker, reason = reason})
  if attempts >= tonumber(ARGV[7]) then
    fail_job(label(idx) .. ': proof still invalid after ' .. attempts .. ' attempts (last by worker ' ..
             worker .. ')', idx)
    return {'failed'}
  end
  redis.call('HDEL', KEYS[6], idx)
  local excluded = redis.call('HGET', key, 'excluded')
  if not contains(excluded, worker) then
    redis.call('HSET', key, 'excluded', (((excluded or '') .. ' ' .. worker):gsub('^ ', '')))
  end
  local newtok = redis.call('HINCRBY', key, 'token', 1)
  redis.call('HSET', key, 'state', 'sending', 'routed_to', route, 'enqueued_at', ARGV[3])
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[8]), m)
  if route ~= '' then redis.call('ZADD', KEYS[5], now, m) else redis.call('ZREM', KEYS[5], m) end
  table.insert(out, idx)
  table.insert(out, tostring(newtok))
end
redis.call('HDEL', KEYS[1], 'finalize_sent')
redis.call('HSET', KEYS[7], 'state', 'idle', 'finished_at', ARGV[3])
redis.call('ZREM', KEYS[3], job_id .. sep .. 'finalize')
redis.call('PUBLISH', channel, 'requeued')
return out
"""

# KEYS: +results, finalize slot, part slots.  ARGV: +finalize token, verify_s
_FINISH = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then return 0 end
if redis.call('HGET', KEYS[7], 'token') ~= ARGV[6] or redis.call('HGET', KEYS[7], 'state') ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done', 'finished_at', ARGV[3], 'verify_s', ARGV[7])
redis.call('HSET', KEYS[7], 'state', 'verified', 'finished_at', ARGV[3])
for k = 8, #KEYS do redis.call('HSET', KEYS[k], 'state', 'verified') end
drop_members()
event({event = 'done'})
redis.call('PUBLISH', channel, 'done')
return 1
"""

_CANCEL = _PRELUDE + r"""
if not live(redis.call('HGET', KEYS[1], 'state')) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished_at', ARGV[3])
drop_members()
event({event = 'cancelled'})
redis.call('PUBLISH', channel, 'cancelled')
return 1
"""

# KEYS: job, finalize slot, deadlines, events, routed, request (or a dummy), jobs, part slots
# ARGV: +request_id, priority, zkey sha, n, send_grace_s, witness shas...
_SUBMIT = _PRELUDE + r"""
if ARGV[6] ~= '' then
  local existing = redis.call('GET', KEYS[6])
  if existing then return {'exists', existing} end
  redis.call('SET', KEYS[6], job_id)
end
local n = tonumber(ARGV[9])
redis.call('HSET', KEYS[1], 'state', 'queued', 'priority', ARGV[7], 'zkey', ARGV[8], 'n', n,
           'created_at', ARGV[3], 'request_id', ARGV[6])
redis.call('HSET', KEYS[2], 'state', 'idle', 'token', 0, 'attempts', 0)
for i = 0, n - 1 do
  redis.call('HSET', KEYS[8 + i], 'state', 'sending', 'token', 1, 'attempts', 0, 'witness', ARGV[11 + i],
             'enqueued_at', ARGV[3], 'routed_to', '')
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[10]), job_id .. sep .. i)
end
redis.call('ZADD', KEYS[7], now, job_id)
return {'created', job_id}
"""


@dataclass(frozen=True)
class Outcome:
    """What a script decided: `kind` (e.g. "ok", "stale", "send") and its details."""

    kind: str
    detail: tuple[str, ...] = ()


def _outcome(raw) -> Outcome:
    if isinstance(raw, list):
        items = [x.decode() if isinstance(x, bytes) else str(x) for x in raw]
        return Outcome(items[0], tuple(items[1:]))
    return Outcome(raw.decode() if isinstance(raw, bytes) else str(raw))


class Barrier:
    """The job state machine on one Redis database. Every method is one atomic script.

    Methods raise redis.RedisError when Redis cannot be reached.
    """

    def __init__(self, client: redis.Redis, *, lease_ttl_s: float, max_attempts: int,
                 send_grace_s: float, max_bounces: int):
        self.r = client
        self.lease_ttl_s = lease_ttl_s
        self.max_attempts = max_attempts
        self.send_grace_s = send_grace_s
        self.max_bounces = max_bounces
        reg = client.register_script
        self._claim, self._refresh, self._record = reg(_CLAIM), reg(_REFRESH), reg(_RECORD)
        self._mark_sent, self._requeue, self._resend = reg(_MARK_SENT), reg(_REQUEUE), reg(_RESEND)
        self._fail_input, self._reprove, self._finish = reg(_FAIL_INPUT), reg(_REPROVE), reg(_FINISH)
        self._cancel, self._submit = reg(_CANCEL), reg(_SUBMIT)

    # KEYS[1..5] and ARGV[1..5] every script starts with.
    @staticmethod
    def _base(job_id: str, slot) -> tuple[list[str], list]:
        slot = str(slot)
        return ([keys.job(job_id), keys.slot(job_id, slot), keys.deadlines(), keys.events(job_id),
                 keys.routed()],
                [job_id, slot, repr(time.time()), keys.notify(job_id), keys.MEMBER_SEP])

    def _run(self, script, job_id: str, slot, extra_keys=(), extra_args=()) -> Outcome:
        k, a = self._base(job_id, slot)
        return _outcome(script(keys=k + list(extra_keys), args=a + [str(x) for x in extra_args]))

    def submit(self, job_id: str, *, request_id: str | None, priority: str, zkey_sha: str,
               witness_shas: list[str]) -> Outcome:
        """Creates the job with every partition in `sending` (token 1), or finds the request's job.

        Returns Outcome("created", (job_id,)) or Outcome("exists", (existing_job_id,)).
        """
        n = len(witness_shas)
        k = [keys.job(job_id), keys.slot(job_id, FINALIZE_SLOT), keys.deadlines(), keys.events(job_id),
             keys.routed(), keys.request(request_id or "-"), keys.jobs()]
        k += [keys.slot(job_id, i) for i in range(n)]
        a = [job_id, "-", repr(time.time()), keys.notify(job_id), keys.MEMBER_SEP, request_id or "",
             priority, zkey_sha, n, self.send_grace_s, *witness_shas]
        return _outcome(self._submit(keys=k, args=[str(x) for x in a]))

    def claim(self, job_id: str, slot, token: int, worker: str, pid: int) -> Outcome:
        """Starts an attempt: "ok" (attempt n), or why not: job_over, stale, done, busy, excluded."""
        return self._run(self._claim, job_id, slot,
                         extra_args=(token, worker, pid, self.lease_ttl_s, self.max_attempts))

    def refresh(self, job_id: str, slot, token: int, worker: str) -> str:
        """Extends the lease: "ok", "lost" (someone else owns the slot now) or "job_over"."""
        return self._run(self._refresh, job_id, slot, extra_args=(token, worker, self.lease_ttl_s)).kind

    def record(self, job_id: str, index: int, worker: str, payload: dict) -> Outcome:
        """Stores a partition result once (HSETNX): "recorded", "duplicate", "job_over", or
        "finalize" (with the finalize token) when this write completed the set."""
        return self._run(self._record, job_id, index,
                         extra_keys=(keys.results(job_id), keys.slot(job_id, FINALIZE_SLOT)),
                         extra_args=(worker, json.dumps(payload), self.send_grace_s))

    def mark_sent(self, job_id: str, slot, token: int) -> bool:
        """The message for (slot, token) is on a queue: stop the re-send deadline."""
        return self._run(self._mark_sent, job_id, slot, extra_args=(token,)).kind == "1"

    def requeue(self, job_id: str, slot, *, token: int | None, states: str, event: str, reason: str,
                require_expired: bool = False, exclude: str = "", route_to: str = "",
                counts_as_attempt: bool = True) -> Outcome:
        """Moves a slot back to `sending` with a new token: "send" (new token), or "failed"
        (attempts or bounces exhausted: the job failed with `reason`), "stale", "skip",
        "job_over"."""
        return self._run(self._requeue, job_id, slot, extra_args=(
            "" if token is None else token, f" {states} ", int(require_expired), event, reason,
            exclude, route_to, self.max_attempts, self.send_grace_s, int(counts_as_attempt),
            self.max_bounces))

    def resend(self, job_id: str, slot, token: int) -> Outcome:
        """A slot stuck in `sending`: "resend" (with its route) after pushing its deadline."""
        return self._run(self._resend, job_id, slot, extra_args=(token, self.send_grace_s))

    def fail_input(self, job_id: str, slot, reason: str) -> bool:
        """Fails the job now (bad input: not retried). False when the job was already over."""
        return self._run(self._fail_input, job_id, slot, extra_args=(reason,)).kind == "1"

    def reprove(self, job_id: str, finalize_token: int, bad: list[dict]) -> Outcome:
        """Finalize found invalid proofs: drops them, excludes their workers and re-enqueues
        them. `bad` items: index, worker, fingerprint, reason, route_to.
        Returns "send" with (index, token) pairs flattened, or "failed", "stale", "job_over"."""
        k = [keys.results(job_id), keys.slot(job_id, FINALIZE_SLOT), keys.bad(job_id)]
        k += [keys.slot(job_id, b["index"]) for b in bad]
        args: list = [finalize_token, self.max_attempts, self.send_grace_s]
        for b in bad:
            args += [b["index"], b["worker"], json.dumps(b["fingerprint"] or {}), b["reason"], b["route_to"]]
        return self._run(self._reprove, job_id, FINALIZE_SLOT, extra_keys=k, extra_args=args)

    def finish(self, job_id: str, finalize_token: int, n_partitions: int, verify_s: float) -> bool:
        """Marks the job done (finalize verified every partition). False if it was not current."""
        k = [keys.results(job_id), keys.slot(job_id, FINALIZE_SLOT)]
        k += [keys.slot(job_id, i) for i in range(n_partitions)]
        return self._run(self._finish, job_id, FINALIZE_SLOT, extra_keys=k,
                         extra_args=(finalize_token, f"{verify_s:.6f}")).kind == "1"

    def cancel(self, job_id: str) -> bool:
        """Cancels a job that is not over; False when it already was."""
        return self._run(self._cancel, job_id, FINALIZE_SLOT).kind == "1"
