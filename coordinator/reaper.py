"""The reaper: recovers slots whose worker vanished, in seconds.

kombu redelivers the message of a SIGKILLed worker only after the Redis visibility timeout
(an hour by default), and only from an index zkqueue's transport does not keep
(coordinator/transport._QoS). The reaper does not wait: a running slot whose lease deadline
(or run deadline: alive but hung) passed is re-enqueued with a new token (a copy of the old
message finds a stale token and does nothing); a slot stuck in `sending` is sent again; a queued slot whose message is gone from the broker, or was taken
by a consumer that died before claiming it, is sent again with the same token; a slot
routed to a worker that stopped beating is routed again. Attempts are capped by the
transition scripts, which fail the job with the reason when they run out.

Any process may run a Reaper; a Redis lock (SET NX PX, renewed by its owner) keeps one
active at a time, and another takes over within the lock TTL if the owner dies. A standby
(every worker process runs one) reads only the lock's PTTL, once per lock TTL, and tries
the lock when it is gone; a worker's heartbeat carries that PTTL in its own request
(looks_carried). The owner's tick starts with one script (_SCAN): a quiet tick is one request.

When Redis restarted, failed over, or broke the reaper's connection, it may have lost what it
acknowledged just before; the owner then looks for every queued partition's message at once
(the next tick), not at each one's next check.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from typing import Callable

import redis

from . import keys
from .broker import UNACKED_HASH, queue_lists, unacked_slots, unacked_slots_in
from .connections import Reconnects
from .queue_index import QueueIndex
from .replies import Check, Lost, Parked, Reply, Resend
from .scheduler import Scheduler, what

log = logging.getLogger("zkqueue.reaper")

DUE_BATCH = 500          # due slots read per round trip
# A standby whose looks at the lock ride on its worker's heartbeat (looks_carried) still looks
# by itself when none has told it anything for this long (the heartbeat thread stalled).
CARRIED_LOOK_FALLBACK_S = 10.0
# Dead workers (no heartbeat for a minute or more) are looked for every FORGET_EVERY ticks,
# not every tick: their cutoff is a minute, their cost a TIME and a ZRANGEBYSCORE.
FORGET_EVERY = 10

# Unlock only if still ours, so a slow owner never deletes a successor's lock.
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
# The owner renews with it (GET, PEXPIRE); a standby runs it only when a PTTL found the
# lock gone (Reaper.acquire), when it takes the lock (SET NX) unless another standby was
# first: then it learns (as minus the milliseconds, at least 1) when that one's lock expires.
_RENEW = ("local owner = redis.call('GET', KEYS[1]) "
          "if owner == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end "
          "if owner then local t = redis.call('PTTL', KEYS[1]) if t < 1 then t = 1 end return -t end "
          "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0")
# A tick's first request: _RENEW, then, when the lock is ours, Redis's clock and what the tick
# reads first (the due deadlines and checks, a batch of each; the routed slots; the
# unacknowledged messages), so that an owner's quiet tick costs one request, not six.
_SCAN = ("local owner = redis.call('GET', KEYS[1]) "
         "if owner == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) "
         "elseif owner then local t = redis.call('PTTL', KEYS[1]) if t < 1 then t = 1 end return {-t} "
         "elseif not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end "
         "local t = redis.call('TIME') "
         "local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2])) "
         "return {1, now, "
         "redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, ARGV[3]), "
         "redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, ARGV[3]), "
         "redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES'), redis.call('HGETALL', KEYS[5])}")
# Makes up to ARGV[1] queued checks not yet due (zkq:checks) due now; returns how many.
_DUE_NOW = ("local t = redis.call('TIME') "
            "local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2])) "
            "local later = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'LIMIT', 0, ARGV[1]) "
            "local args = {} "
            "for _, m in ipairs(later) do table.insert(args, now) table.insert(args, m) end "
            "if #args > 0 then redis.call('ZADD', KEYS[1], 'XX', unpack(args)) end "
            "return #later")


class Reaper:
    """One reaper loop over a Scheduler's Redis."""

    def __init__(self, scheduler: Scheduler, *, owner: str | None = None, looks_carried: bool = False):
        """`looks_carried`: while a standby, its looks at the lock (PTTL) ride on its worker's
        heartbeat (registry.Beat's `lock_watch`: look_due, saw_lock), one request for both,
        rather than a request of their own; run() then sleeps until a look finds the lock
        gone, or CARRIED_LOOK_FALLBACK_S."""
        self.s = scheduler
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        self.interval_s = scheduler.settings.reaper_interval_s
        self.lock_ttl_ms = int(max(3 * self.interval_s, 2.0) * 1000)
        self._renew = scheduler.r.register_script(_RENEW)
        self._scan = scheduler.r.register_script(_SCAN)
        self._release = scheduler.r.register_script(_RELEASE)
        self._due_now = scheduler.r.register_script(_DUE_NOW)
        self._checks_due_now = False                # Redis reconnected: see the module's docstring
        self._reconnects = Reconnects(scheduler.r, self._reconnected)
        self._unacked_seen: dict[str, float] = {}   # delivery tag -> when this reaper first saw it
        self._next_try_s = self.interval_s          # how long run() waits before the next tick
        self._held = False                          # the last try found the lock ours
        self._looks_carried = looks_carried
        self._look_at = 0.0                         # when a standby's next look is due (monotonic)
        self._seen_gone = False                     # a carried look found the lock gone
        self._wake = threading.Event()              # ... and woke run()
        self._ticks = 0                             # ticks as the owner (FORGET_EVERY)
        # Unacknowledged messages whose every slot was seen claimed (not queued under the
        # message's token): their consumer started them, so they are never orphans; not looked
        # at again (a long proof, a batch of 16, holds its message unacknowledged for its
        # whole run: one read of each of its slots per tick otherwise).
        self._claimed_tags: set[str] = set()
        # What waits on the queues, read incrementally: a full read per check would cost
        # O(queued messages) every tick.
        self._queued = QueueIndex(scheduler.r)

    def acquire(self) -> bool:
        """Takes or renews the reaper lock; True when this process is the reaper now.

        A standby (the lock was another's at its last try) first reads the lock's PTTL, one
        command: while the lock lives it waits until it would expire unless renewed (the
        lock can change hands no sooner), and runs the script (GET, then SET NX) only once
        the lock is gone, or has no expiry. Every worker process runs a standby: at 16
        workers their scripts (three commands) every lock TTL were over a command a partition.
        """
        if self._lock_lives():
            return False
        return self._took(int(self._renew(keys=[keys.reaper_lock()], args=[self.owner, self.lock_ttl_ms])))

    def _lock_lives(self) -> bool:
        """A standby's look at the lock (one PTTL): True while another's lock lives, and then
        its next try is when the lock would expire unless renewed. False at once when a look
        its heartbeat carried found the lock gone."""
        if self._held:
            return False
        if self._seen_gone:
            self._seen_gone = False
            return False
        left_ms = self.s.r.pttl(keys.reaper_lock())
        if left_ms > 0:
            self._waits(left_ms)
            return True
        return False

    def _waits(self, left_ms: int) -> None:
        """Another's lock lives `left_ms` more: the next look and try are when it would expire
        unless renewed (not before the interval)."""
        self._next_try_s = max(self.interval_s, left_ms / 1000.0)
        self._look_at = time.monotonic() + self._next_try_s

    def look_due(self) -> bool:
        """Whether a heartbeat should carry a look at the lock for this standby now."""
        return self._looks_carried and not self._held and time.monotonic() >= self._look_at

    def saw_lock(self, left_ms: int) -> None:
        """What a look the heartbeat carried found (PTTL): another's lock living `left_ms`
        more, or none (then run() wakes and tries it)."""
        if left_ms > 0:
            self._waits(left_ms)
            return
        self._seen_gone = True
        self._wake.set()

    def _took(self, got: int) -> bool:
        """What a try of the lock answered (_RENEW's or _SCAN's first item): 1 ours, 0 not
        taken, minus the milliseconds another's lock lives. True when ours."""
        self._held = got > 0
        # A standby's next try: when the owner's lock would expire (not before the interval).
        if got < 0:
            self._waits(-got)
        else:
            self._next_try_s = self.interval_s
        return self._held

    def release(self) -> None:
        self._held = False
        try:
            self._release(keys=[keys.reaper_lock()], args=[self.owner])
        except redis.RedisError:
            pass

    def tick(self) -> int:
        """One pass if this process holds the lock; returns how many slots it acted on.

        Raises:
            redis.RedisError: Redis cannot be reached.
        """
        if self._lock_lives():
            return 0
        scan = self._scan(keys=[keys.reaper_lock(), keys.deadlines(), keys.checks(), keys.routed(), UNACKED_HASH],
                          args=[self.owner, self.lock_ttl_ms, DUE_BATCH])
        if not self._took(int(scan[0])):
            return 0
        if self._checks_due_now:
            self._make_checks_due()
        acted = 0
        # Redis's clock read once per tick (the scan's TIME), and carried on by this host's
        # monotonic clock for the rest of it (a tick lasts about an interval at most).
        started, redis_now = time.monotonic(), float(scan[1])
        first_due = {keys.deadlines(): scan[2], keys.checks(): scan[3]}

        def now() -> float:
            return redis_now + (time.monotonic() - started)

        # Due slots in batches, oldest deadline first, until none is left or the tick has
        # used its interval: first zkq:deadlines (sends, leases, parked slots), then with what
        # is left of the interval zkq:checks (queued messages to look for), so that a lease
        # that expired never waits behind the checks of a long queue. The first batch of each
        # came with the scan.
        budget_end = started + self.interval_s
        for zset in (keys.deadlines(), keys.checks()):
            due = first_due[zset]
            while True:
                acted += self._reap(due) if zset == keys.deadlines() else self._recheck(due)
                if len(due) < DUE_BATCH or time.monotonic() > budget_end or not self.acquire():
                    break
                due = self.s.r.zrangebyscore(zset, "-inf", now(), start=0, num=DUE_BATCH)
        acted += self._adopt_orphans(dict(zip(scan[5][::2], scan[5][1::2])))
        routed, routed_now = scan[4], now()
        for raw, routed_at in zip(routed[::2], routed[1::2]):
            job_id, slot = keys.parse_member(raw.decode())
            acted += self._routed(job_id, slot, waited_s=routed_now - float(routed_at))
        if self._ticks % FORGET_EVERY == 0:
            self._forget_dead_workers(now())
        self._ticks += 1
        return acted

    def _reconnected(self) -> None:
        self._checks_due_now = True

    def _make_checks_due(self) -> None:
        """Every queued slot's check due now (they are served from the next tick on, after the
        deadlines, as any due check): its message is looked for at once, and sent again if it
        is gone with what Redis lost."""
        self._checks_due_now = False
        made = 0
        try:
            while True:
                n = int(self._due_now(keys=[keys.checks()], args=[DUE_BATCH]))
                made += n
                if n < DUE_BATCH:
                    break
        except redis.RedisError:
            self._checks_due_now = True         # the next tick goes on with it
            raise
        if made:
            log.warning("reaper: Redis reconnected (restarted, failed over, or a connection broke); %d queued "
                        "partitions' messages looked for now, not at their next check", made)

    def _reap(self, due: list[bytes]) -> int:
        """Acts on slots whose deadline passed (reap.lua decides what each calls for)."""
        acted, checks = 0, []
        for raw in due:
            job_id, slot = keys.parse_member(raw.decode())
            match self.s.reap(job_id, slot):
                case Resend(token=token, route=route):
                    log.warning("job %s %s: message not confirmed sent; sending it again", job_id, what(slot))
                    self.s.send(job_id, slot, token, route_to=route)
                    acted += 1
                case Lost(token=token, worker=worker, overdue=overdue):
                    acted += self._lost(job_id, slot, token, worker, overdue)
                case Check(token=token):
                    checks.append((job_id, slot, token))
                case Parked(token=token):
                    acted += self._unpark(job_id, slot, token)
                case Reply(kind="gave_up"):
                    log.error("job %s %s: no eligible worker for orphan_timeout_s: given up", job_id, what(slot))
                    acted += 1
        if checks:
            acted += self._resend_missing(checks)
        return acted

    def _recheck(self, due: list[bytes]) -> int:
        """Due checks of queued slots: re-armed in one transition (Scheduler.recheck), then
        their messages looked for; a slot that moved on meanwhile goes through reap.lua."""
        checks, others = self.s.recheck([raw.decode() for raw in due])
        acted = self._reap([m.encode() for m in others]) if others else 0
        if checks:
            acted += self._resend_missing(checks)
        return acted

    def _lost(self, job_id: str, slot: str, token: int, worker: str, overdue: bool) -> int:
        exclude = route = ""
        if overdue:
            # Alive but not progressing (a hung kernel): that worker is restarted by its own
            # lease thread; a partition goes to another one.
            reason = f"worker {worker} ran past the deadline of {what(slot)} (hung?)"
            if keys.slot_kind(slot) != "synth":
                exclude, route = worker, self.s.pick_route(self.s.excluded(job_id, slot) | {worker})
        else:
            reason = f"worker {worker} stopped renewing its lease on {what(slot)} (killed or hung)"
        out = self.s.requeue(job_id, slot, token, event="overdue" if overdue else "lost", reason=reason,
                             exclude=exclude, route_to=route, require_expired=True)
        if out.kind in ("send", "failed"):
            log.warning("job %s: %s -> %s", job_id, reason, out.kind)
            return 1
        return 0

    def _unpark(self, job_id: str, slot: str, token: int) -> int:
        """Sends a parked slot to an eligible worker, if one is alive now."""
        others = self.s.eligible_workers(self.s.excluded(job_id, slot), needs=self.s.parked_needs(job_id, slot))
        if not others:
            return 0
        out = self.s.reroute(job_id, slot, token, states="parked", event="rerouted",
                             reason="an eligible worker is alive again", route_to=random.choice(others))
        return int(out.kind == "send")

    def _resend_missing(self, checks: list[tuple[str, str, int]]) -> int:
        """Queued slots due for a check: re-sends those whose message is on no queue and
        delivered to no consumer (lost from the broker: an append-only-file gap, a deleted
        queue). A witness whose message waits while no live worker takes synthesis is the
        one special case: unserved.lua fails its job after orphan_timeout_s."""
        self._queued.refresh()
        unacked = {slot for _, slot in unacked_slots(self.s.r)}
        unserved = None
        acted = 0
        for job_id, slot, token in checks:
            if (job_id, slot, token) in self._queued or (job_id, slot, token) in unacked:
                if keys.slot_kind(slot) == "synth":
                    unserved = unserved_reason(self.s.registry.live()) if unserved is None else unserved
                    if self.s.unserved(job_id, slot, token, reason=unserved) == "failed":
                        log.error("job %s failed: %s: %s", job_id, what(slot), unserved)
                        acted += 1
                continue
            if self.s.resend(job_id, slot, token):
                log.warning("job %s %s: its message is gone from the broker; sent it again", job_id, what(slot))
                acted += 1
        return acted

    def _adopt_orphans(self, unacked: dict) -> int:
        """Re-sends messages whose consumer died after taking them and before claiming them
        (`unacked`: the hash of unacknowledged messages, as the tick's scan read it).

        A live worker claims a message it took within milliseconds, so a message unacknowledged
        for orphan_grace_s whose slot is still queued under its token lost its consumer (kombu
        would have redelivered it only after the visibility timeout, an hour by default). Also
        drops the copies of messages whose partitions all moved on, after that timeout.
        """
        now = time.monotonic()
        seen, acted = {}, 0
        dropped: set[str] = set()     # tags whose unacknowledged copy a resend dropped already
        waiting: set[str] = set()     # tags with a slot still queued under the message's token
        due = []                      # (tag, job, slot, token) past their grace, not known claimed
        for tag, (job_id, slot, token) in unacked_slots_in(unacked):
            first = seen[tag] = self._unacked_seen.get(tag, now)
            if now - first >= self.s.settings.orphan_grace_s and tag not in self._claimed_tags:
                due.append((tag, job_id, slot, token))
        # A queued slot always has its next check in zkq:checks (check_at), and a claimed one its
        # lease in zkq:deadlines instead: one ZMSCORE tells which of the messages' slots may still
        # wait, so a slot is read only then, not once for every message a live worker claimed.
        in_checks = self.s.r.zmscore(keys.checks(), [keys.member(j, s) for _, j, s, _ in due]) if due else []
        for (tag, job_id, slot, token), check in zip(due, in_checks):
            if check is None:
                continue      # not queued: claimed (the slot's own deadlines cover it now) or ended
            state, current = self.s.r.hmget(keys.slot(job_id, slot), "state", "token")
            if state != b"queued" or current is None or int(current) != token:
                continue      # claimed (the slot's own deadlines cover it now), or a stale copy
            waiting.add(tag)
            # A prove_batch message stands for several slots under one tag: the first resend
            # drops its copy, the others are sent again as messages lost.
            if self.s.resend(job_id, slot, token, orphan_tag="" if tag in dropped else tag):
                log.warning("job %s %s: its message was taken by a worker that died before starting it; "
                            "sent it again", job_id, what(slot))
                dropped.add(tag)
                acted += 1
        for tag in dropped:
            seen.pop(tag, None)
        # Looked at past their grace, no slot of theirs waiting: claimed for good.
        claimed = {t for t in seen if t in self._claimed_tags
                   or (now - seen[t] >= self.s.settings.orphan_grace_s and t not in waiting)}
        # A claimed message unacknowledged for the visibility timeout: its consumer died, or
        # holds it past any task's time limit. kombu would redeliver it, to meet a stale token;
        # its copy is dropped instead (coordinator/transport._QoS keeps no index for kombu's).
        expired = [t for t in claimed if now - seen[t] >= self.s.settings.visibility_timeout_s]
        if expired:
            self.s.r.hdel(UNACKED_HASH, *expired)
            log.info("dropped %d unacknowledged message(s) whose partitions all moved on", len(expired))
            for t in expired:
                claimed.discard(t)
                seen.pop(t)
        self._claimed_tags = claimed
        self._unacked_seen = seen
        return acted

    def _routed(self, job_id: str, slot: str, *, waited_s: float) -> int:
        """A slot queued on one worker's own queue: handed on if that worker is gone; sent back
        to the shared queue if it went there for key affinity and waited past affinity_wait_s
        (the holder is busier than it looked: any worker may take it now)."""
        state, token, route, excluded, by_affinity = (v.decode() if v else "" for v in self.s.r.hmget(
            keys.slot(job_id, slot), "state", "token", "routed_to", "excluded", "affinity"))
        if state not in ("queued", "sending") or not route:
            self.s.r.zrem(keys.routed(), keys.member(job_id, slot))
            return 0
        if self.s.registry.alive(route):
            if not by_affinity or waited_s <= self.s.settings.affinity_wait_s:
                return 0
            out = self.s.reroute(job_id, slot, int(token), states="queued", event="rerouted", route_to="",
                                 reason=f"worker {route}, which holds its key, did not take it within "
                                        f"{self.s.settings.affinity_wait_s:g} s")
            return int(out.kind in ("send", "failed"))
        out = self.s.hand_on(job_id, slot, int(token), leaving=route, states="queued sending", event="rerouted",
                             reason=f"worker {route} it was routed to is gone",
                             parked_reason=f"no eligible worker is left to take it (worker {route} it was routed "
                                           f"to is gone; excluded: {excluded or 'none'})")
        return int(out.kind in ("send", "failed", "parked"))

    def _forget_dead_workers(self, now: float) -> None:
        """Drops workers whose heartbeat stopped long ago (`now`: Redis's time) from
        zkq:workers, with their own queues."""
        for worker_id in self.s.registry.dead(older_than_s=max(60.0, 10 * self.s.settings.heartbeat_ttl_s), now=now):
            # Its own queue can only hold stale messages now (routed slots were re-routed).
            self.s.r.delete(*queue_lists(keys.worker_queue(worker_id)))
            self.s.r.zrem(keys.workers(), worker_id)

    def run(self, stop: threading.Event) -> None:
        """Ticks every interval until `stop` is set (a standby: when the lock would expire;
        with looks_carried, when a carried look found it gone); Redis errors are logged and
        retried."""
        while not stop.is_set():
            self._wake.clear()
            try:
                self.tick()
            except redis.RedisError as exc:
                log.warning("reaper: redis error: %s", exc)
            except Exception:   # a reaper that dies silently loses every later recovery
                log.exception("reaper: unexpected error")
            if self._looks_carried and not self._held:
                self._wake.wait(max(self._next_try_s, CARRIED_LOOK_FALLBACK_S))
            else:
                stop.wait(self._next_try_s)
        self.release()

    def start_thread(self) -> Callable[[], None]:
        """Runs the loop in a daemon thread; returns what stops it."""
        stop = threading.Event()
        threading.Thread(target=self.run, args=(stop,), name="zkqueue-reaper", daemon=True).start()

        def stop_it() -> None:
            stop.set()
            self._wake.set()
        return stop_it


def unserved_reason(live: list[dict]) -> str:
    """Why no live worker will take a witness to compute, or "" when one will (or when no
    worker is alive at all: then the job waits for workers, as any job does)."""
    if not live or any(w.get("synthesizes") for w in live):
        return ""
    names = ", ".join(sorted(w["worker"] for w in live))
    return (f"no live worker takes witness synthesis (queue {keys.SYNTH_QUEUE}): the workers alive "
            f"({names}) only prove. Start a CPU worker (`zkqueue worker --cpu 1`), or GPU workers with "
            "--synthesize, or submit witnesses instead of inputs")
