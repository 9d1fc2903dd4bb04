"""The reaper: recovers slots whose worker vanished, in seconds.

Celery redelivers the message of a SIGKILLed worker only after the Redis visibility
timeout (an hour by default). The reaper does not wait for that: a running slot whose
lease deadline passed is re-enqueued with a new token (the late redelivery then finds a
stale token and does nothing); a slot stuck in `sending` is sent again; a slot routed to
a worker that stopped beating is routed again. Attempts are capped by the barrier, which
fails the job with the reason when they run out.

Any process may run a Reaper; a Redis lock (SET NX PX, renewed by its owner) keeps one
active at a time, and another takes over within the lock TTL if the owner dies.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

import redis

from . import keys
from .broker import queue_lists
from .keys import FINALIZE_SLOT
from .scheduler import Scheduler

log = logging.getLogger("zkqueue.reaper")

# Unlock only if still ours, so a slow owner never deletes a successor's lock.
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_RENEW = ("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end "
          "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0")


class Reaper:
    """One reaper loop over a Scheduler's Redis."""

    def __init__(self, scheduler: Scheduler, *, owner: str | None = None):
        self.s = scheduler
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        self.interval_s = scheduler.settings.reaper_interval_s
        self.lock_ttl_ms = int(max(3 * self.interval_s, 2.0) * 1000)
        self._renew = scheduler.r.register_script(_RENEW)
        self._release = scheduler.r.register_script(_RELEASE)

    def acquire(self) -> bool:
        """Takes or renews the reaper lock; True when this process is the reaper now."""
        return bool(self._renew(keys=[keys.reaper_lock()], args=[self.owner, self.lock_ttl_ms]))

    def release(self) -> None:
        try:
            self._release(keys=[keys.reaper_lock()], args=[self.owner])
        except redis.RedisError:
            pass

    def tick(self) -> int:
        """One pass if this process holds the lock; returns how many slots it acted on.

        Raises:
            redis.RedisError: Redis cannot be reached.
        """
        if not self.acquire():
            return 0
        acted = 0
        now = time.time()
        for raw in self.s.r.zrangebyscore(keys.deadlines(), "-inf", now, start=0, num=200):
            job_id, slot = keys.parse_member(raw.decode())
            acted += self._expired(job_id, slot)
        for raw in self.s.r.zrange(keys.routed(), 0, -1):
            job_id, slot = keys.parse_member(raw.decode())
            acted += self._routed(job_id, slot)
        self._forget_dead_workers()
        return acted

    def _expired(self, job_id: str, slot: str) -> int:
        state, token, worker, route = (v.decode() if v else "" for v in self.s.r.hmget(
            keys.slot(job_id, slot), "state", "token", "worker", "routed_to"))
        member = keys.member(job_id, slot)
        if state == "sending":
            out = self.s.barrier.resend(job_id, slot, int(token))
            if out.kind == "resend":
                log.warning("job %s %s: message not confirmed sent; sending it again", job_id, slot)
                self.s.send(job_id, slot, int(token), route_to=out.detail[0] if out.detail else "")
                return 1
            return 0
        if state == "running":
            reason = (f"worker {worker} stopped renewing its lease on "
                      f"{'finalize' if slot == FINALIZE_SLOT else 'partition ' + slot} (killed or hung)")
            out = self.s.requeue(job_id, slot, token=int(token), states="running", require_expired=True,
                                 event="lost", reason=reason)
            if out.kind in ("send", "failed"):
                log.warning("job %s: %s -> %s", job_id, reason, out.kind)
                return 1
            return 0
        self.s.r.zrem(keys.deadlines(), member)   # the slot moved on; its deadline is stale
        return 0

    def _routed(self, job_id: str, slot: str) -> int:
        state, token, route, excluded = (v.decode() if v else "" for v in self.s.r.hmget(
            keys.slot(job_id, slot), "state", "token", "routed_to", "excluded"))
        if state not in ("queued", "sending") or not route:
            self.s.r.zrem(keys.routed(), keys.member(job_id, slot))
            return 0
        if self.s.registry.alive(route):
            return 0
        new_route = self.s.pick_route(set(excluded.split()) | {route})
        out = self.s.requeue(job_id, slot, token=int(token), states="queued sending", event="rerouted",
                             reason=f"worker {route} it was routed to is gone", route_to=new_route,
                             counts_as_attempt=False)
        return int(out.kind in ("send", "failed"))

    def _forget_dead_workers(self) -> None:
        for worker_id in self.s.registry.dead(older_than_s=max(60.0, 10 * self.s.settings.heartbeat_ttl_s)):
            # Its own queue can only hold stale messages now (routed slots were re-routed).
            self.s.r.delete(*queue_lists(keys.worker_queue(worker_id)))
            self.s.r.zrem(keys.workers(), worker_id)

    def run(self, stop: threading.Event) -> None:
        """Ticks every interval until `stop` is set; Redis errors are logged and retried."""
        while not stop.is_set():
            try:
                self.tick()
            except redis.RedisError as exc:
                log.warning("reaper: redis error: %s", exc)
            except Exception:   # a reaper that dies silently loses every later recovery
                log.exception("reaper: unexpected error")
            stop.wait(self.interval_s)
        self.release()

    def start_thread(self) -> tuple[threading.Thread, threading.Event]:
        """Runs the loop in a daemon thread; set the returned event to stop it."""
        stop = threading.Event()
        t = threading.Thread(target=self.run, args=(stop,), name="zkqueue-reaper", daemon=True)
        t.start()
        return t, stop
